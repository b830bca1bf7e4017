"""A run: from what the user said to a resolved config (``runspec``), trained, checkpointed
and restored (``train``, ``checkpoint``, ``restore``), with its schedule, progress and limits."""
