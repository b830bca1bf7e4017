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
