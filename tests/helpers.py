"""Small test utilities shared by several test modules."""


class Interrupt:
    """A training reporter that interrupts at a given step, as Ctrl-C would."""

    def __init__(self, at):
        self.at = at

    def start(self, run_id, total, done): pass
    def evaluated(self, step, train_loss, val_loss): pass
    def finish(self, status): pass

    def step(self, step, loss):
        if step == self.at:
            raise KeyboardInterrupt


def fill_store(path, runs):
    """A results store holding known numbers, built through ResultsStore (no training).

    ``runs``: (task, T, norm, k, seed, status, level, sweep) tuples. A run of level L has the
    curve train = [4L, L, 2L], validation = [4L, L/2, L] at steps 100, 200, 300; a 'running' run
    stops after the first point. Configs are the paper presets', so reports treat them as real.
    """
    from atnbench.runspec import resolve_run
    from atnbench.store import ResultsStore

    ids = []
    with ResultsStore(path) as store:
        for task, T, norm, k, seed, status, level, sweep in runs:
            flags = {"T": T, "norm": norm, "seed": seed, **({"k": k} if k is not None else {})}
            config = resolve_run(task, flags, budget=0.01)
            store.start_run(config.run_id, config.to_dict(), {"device": "cpu", "threads": 1}, sweep=sweep)
            points = list(zip((100, 200, 300), (4 * level, level, 2 * level), (4 * level, level / 2, level)))
            for step, train, val in points[:1] if status == "running" else points:
                store.log_eval(config.run_id, step, step / 100, train, val, {"accuracy": 1 - level})
            if status != "running":
                store.finish_run(config.run_id, status, {"wall_s": 10.0 + seed, "steps_per_s": 100.0 + seed,
                                                          "min_val_loss": level / 2, "min_train_loss": level})
            ids.append(config.run_id)
    return ids
