"""The ATN paper's evaluation as one resumable plan (``parts``) and the command that runs it and
writes its report (``command``)."""
