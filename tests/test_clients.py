"""NormLSTM / NormGRU in two clients written for nn.LSTM / nn.GRU, changed in one line (issue 39).

The clients are this file's own small code in the shape of the two usual ones: a packed
bidirectional classifier as the sentiment tutorials write it (``packed_output, (hidden, cell) =
self.rnn(packed)``, then ``torch.cat((hidden[-2], hidden[-1]), dim=1)``), and pytorch/examples'
word_language_model (tied embedding, truncated BPTT carrying the state and detaching it as a tuple
(``repackage_hidden``), ``torch.save(model)`` / ``torch.load(path)``). In each, the only
difference between the nn.LSTM client and the NormLSTM one is the class the ``self.rnn = ...``
line calls (``RNN`` here). For every norm of both cells: the client runs, trains, saves and
loads; with ``norm="none"`` it computes what the nn.LSTM / nn.GRU client computes.
"""

from __future__ import annotations

import importlib
import pickle
import re
import warnings
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from atnbench.nn import SCHEMES, NormGRU, NormLSTM
from atnbench.nn.state import detach_state, windows_of

CELLS = {"lstm": (NormLSTM, nn.LSTM), "gru": (NormGRU, nn.GRU)}
NORMS = tuple(SCHEMES)
VOCAB, K = 17, 3
DT = torch.float64


# ----------------------------------------------------------------------------- client 1: classifier

class Classifier(nn.Module):
    """Embedding, a packed 2-layer bidirectional RNN, the last layer's two final states
    concatenated, a linear read-out (batch first, sequences of any order and length)."""

    def __init__(self, RNN, emb=6, hidden=5, classes=3, dropout=0.25):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb, padding_idx=0)
        self.rnn = RNN(emb, hidden, num_layers=2, bidirectional=True, dropout=dropout, batch_first=True)
        self.fc = nn.Linear(hidden * 2, classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, text, lengths):
        embedded = self.dropout(self.embedding(text))
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_output, hidden = self.final_hidden(packed)
        output, _ = pad_packed_sequence(packed_output, batch_first=True)
        features = self.dropout(torch.cat((hidden[-2], hidden[-1]), dim=1))
        return self.fc(features), output, hidden


class LSTMClassifier(Classifier):
    def final_hidden(self, packed):
        packed_output, (hidden, cell) = self.rnn(packed)
        return packed_output, hidden


class GRUClassifier(Classifier):
    def final_hidden(self, packed):
        packed_output, hidden = self.rnn(packed)
        return packed_output, hidden


CLASSIFIERS = {"lstm": LSTMClassifier, "gru": GRUClassifier}


def reviews(seed=0, lengths=(5, 2, 7, 1, 4)):
    g = torch.Generator().manual_seed(seed)
    text = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for b, n in enumerate(lengths):
        text[b, :n] = torch.randint(1, VOCAB, (n,), generator=g)
    return text, torch.tensor(lengths), torch.randint(0, 3, (len(lengths),), generator=g)


# ----------------------------------------------------------------------------- client 2: language model

class WordLM(nn.Module):
    """word_language_model's RNNModel: encoder, RNN, decoder tied to the encoder, dropout."""

    def __init__(self, RNN, cell, ninp=6, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(VOCAB, ninp)
        self.rnn = RNN(ninp, ninp, nlayers, dropout=dropout)
        self.decoder = nn.Linear(ninp, VOCAB)
        self.decoder.weight = self.encoder.weight
        self.cell, self.nlayers, self.nhid = cell, nlayers, ninp

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        return F.log_softmax(self.decoder(self.drop(output)), dim=-1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.cell == "lstm":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def repackage_hidden(h):
    """Cut the graph between BPTT segments: ``tuple(s.detach() for s in h)`` for the LSTM."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def corpus(steps=13, batch=3, seed=0):
    return torch.randint(0, VOCAB, (steps, batch), generator=torch.Generator().manual_seed(seed))


def segments(data, bptt):
    for i in range(0, data.size(0) - 1, bptt):
        n = min(bptt, data.size(0) - 1 - i)
        yield data[i:i + n], data[i + 1:i + 1 + n]


def train_lm(model, data, bptt=4, lr=0.5):
    """One epoch of word_language_model's ``train()``: the state carried, detached per segment."""
    model.train()
    hidden = model.init_hidden(data.size(1))
    losses = []
    for x, y in segments(data, bptt):
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(x, hidden)
        loss = F.nll_loss(output.view(-1, VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    return losses


def evaluate_lm(model, data, bptt):
    """word_language_model's ``evaluate()``: log-probabilities of every step, state carried."""
    model.eval()
    hidden = model.init_hidden(data.size(1))
    outputs = []
    with torch.no_grad():
        for x, _ in segments(data, bptt):
            output, hidden = model(x, hidden)
            hidden = repackage_hidden(hidden)
            outputs.append(output)
    return torch.cat(outputs)


# ----------------------------------------------------------------------------- building both versions

def normalized(cell, norm, backend="auto"):
    """The class the client's ``self.rnn = RNN(...)`` line calls after the one-line change."""
    return partial(CELLS[cell][0], norm=norm, k=K, backend=backend)


def build(client, RNN, seed=0):
    torch.manual_seed(seed)
    return client(RNN).to(DT)


def torch_allowlist(model, path):
    """The classes ``torch.load`` (weights_only) needs for a whole model: what a client built
    around nn.LSTM must allow by hand (its own classes and torch.nn's), found by saving it."""
    torch.save(model, path)
    found = []
    for name in torch.serialization.get_unsafe_globals_in_checkpoint(path):
        module, _, attr = name.rpartition(".")
        found.append(getattr(importlib.import_module(module), attr))
    return found


def save_and_load(model, path, allowed):
    """``torch.save(model)`` then ``torch.load(path)``: torch's defaults, with the nn.LSTM client's allow-list."""
    torch.save(model, path)
    with torch.serialization.safe_globals(allowed):
        return torch.load(path)


# ----------------------------------------------------------------------------- the classifier

@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", NORMS)
def test_classifier_runs_for_every_norm(cell, norm, tmp_path):
    """nn.LSTM's shapes and meaning: h_n of the top layer is the packed output at each
    review's last word (forward) and first word (reverse); the client trains a step, and the
    whole model saves and loads (torch's defaults) to the same predictions."""
    client = CLASSIFIERS[cell]
    allowed = torch_allowlist(build(client, CELLS[cell][1]), tmp_path / "torch.pt")
    model = build(client, normalized(cell, norm))
    text, lengths, labels = reviews()
    logits, output, hidden = model(text, lengths)
    assert logits.shape == (5, 3) and output.shape == (5, 7, 10) and hidden.shape == (4, 5, 5)
    last = output[torch.arange(5), lengths - 1]
    torch.testing.assert_close(hidden[-2], last[:, :5], rtol=0, atol=0)
    torch.testing.assert_close(hidden[-1], output[:, 0, 5:], rtol=0, atol=0)
    assert not output[torch.arange(7) >= lengths.unsqueeze(1)].any()  # padding: 0 as nn.LSTM gives

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    F.cross_entropy(logits, labels).backward()
    rnn_grads = [p.grad for p in model.rnn.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in rnn_grads)
    optimizer.step()

    loaded = save_and_load(model.eval(), tmp_path / "model.pt", allowed)
    assert type(loaded.rnn) is CELLS[cell][0] and loaded.rnn.norm == norm
    expected, actual = model(text, lengths), loaded(text, lengths)
    for a, b in zip(actual, expected):
        assert torch.equal(a, b)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("backend, dropout", (("auto", 0.25), ("loop", 0.0)))
def test_classifier_none_equals_torch(cell, backend, dropout):
    """norm="none": the client's predictions, final states and one SGD step equal the
    nn.LSTM / nn.GRU client's (its whole state dict loads as it is; torch's kernel or the loop)."""
    client = partial(CLASSIFIERS[cell], dropout=dropout)
    ref = build(client, CELLS[cell][1])
    model = build(client, normalized(cell, "none", backend), seed=1)
    model.load_state_dict(ref.state_dict())
    text, lengths, labels = reviews(seed=3)
    results = []
    for m in (ref, model):
        torch.manual_seed(7)  # the same dropout masks
        logits, output, hidden = m(text, lengths)
        F.cross_entropy(logits, labels).backward()
        torch.optim.SGD(m.parameters(), lr=0.1).step()
        results.append((logits, output, hidden))
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-12)
    for name, value in ref.rnn.state_dict().items():
        torch.testing.assert_close(model.rnn.torch_state_dict()[name], value, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- the language model

@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", NORMS)
def test_language_model_trains_saves_and_loads(cell, norm, tmp_path):
    """Truncated BPTT with the state detached as a tuple, for every norm; then torch.save(model)
    / torch.load(path) under torch's defaults and the nn.LSTM client's allow-list: the loaded
    model evaluates to the same log-probabilities and holds the same state dict."""
    client = partial(WordLM, cell=cell)
    allowed = torch_allowlist(build(client, CELLS[cell][1]), tmp_path / "torch.pt")
    model = build(client, normalized(cell, norm))
    losses = train_lm(model, corpus())
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    loaded = save_and_load(model, tmp_path / "model.pt", allowed)
    loaded.rnn.flatten_parameters()  # as word_language_model does after loading
    assert loaded.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    assert loaded.decoder.weight is loaded.encoder.weight  # still tied
    expected = evaluate_lm(model, corpus(seed=1), 4)
    assert torch.equal(evaluate_lm(loaded, corpus(seed=1), 4), expected)
    fresh = build(client, normalized(cell, norm), seed=2)  # the state_dict way, as before
    fresh.load_state_dict(model.state_dict())
    assert torch.equal(evaluate_lm(fresh, corpus(seed=1), 4), expected)


def test_loading_is_weights_only(tmp_path):
    """The loads above are weights-only: without the client's own class on the allow-list
    torch.load refuses the file; atnbench's classes need no entry."""
    model = build(partial(WordLM, cell="lstm"), normalized("lstm", "atn"))
    torch.save(model, tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match="WordLM"):
        torch.load(tmp_path / "model.pt")
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(tmp_path / "model.pt")
    assert not [name for name in unsafe if "atnbench" in name or "._" in name], unsafe


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", ("none", "ln", "atn"))
def test_language_model_segments_equal_the_whole_stream(cell, norm):
    """The state handed back and detached as a tuple carries ATN's windows: evaluating in
    segments of 2 or 4 steps equals evaluating the stream at once (per-sample norms)."""
    model = build(partial(WordLM, cell=cell), normalized(cell, norm))
    data = corpus(steps=14)
    whole = evaluate_lm(model, data, 13)
    for bptt in (2, 4):
        torch.testing.assert_close(evaluate_lm(model, data, bptt), whole, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cell", CELLS)
def test_saved_state_continues(cell, tmp_path):
    """A returned ATN state (windows on h_n) saved with torch.save loads under torch's defaults
    and continues the stream as the state itself does."""
    model = build(partial(WordLM, cell=cell), normalized(cell, "atn")).eval()
    data = corpus(steps=9)
    _, hidden = model(data[:4], model.init_hidden(3))
    torch.save(repackage_hidden(hidden), tmp_path / "hidden.pt")
    loaded = torch.load(tmp_path / "hidden.pt")
    assert windows_of(loaded[0] if cell == "lstm" else loaded) is not None
    assert torch.equal(model(data[4:], loaded)[0], model(data[4:], hidden)[0])


@pytest.mark.parametrize("cell", CELLS)
def test_rebuilt_state_starts_the_windows_afresh(cell):
    """Only detach() keeps the windows: a state rebuilt by hand (clone) continues with empty
    windows, and the client's init_hidden (zeros) is a fresh start, as state=None."""
    model = build(partial(WordLM, cell=cell), normalized(cell, "atn")).eval()
    data = corpus(steps=9)
    _, hidden = model(data[:4], model.init_hidden(3))
    detached, rebuilt = repackage_hidden(hidden), tuple(s.clone() for s in hidden) if cell == "lstm" else hidden.clone()
    h = detached[0] if cell == "lstm" else detached
    assert windows_of(h) is not None and not any(w.requires_grad for layer in windows_of(h) for w in layer)
    assert windows_of(rebuilt[0] if cell == "lstm" else rebuilt) is None
    whole, _ = model(data, model.init_hidden(3))
    carried, _ = model(data[4:], detached)
    restarted, _ = model(data[4:], rebuilt)
    torch.testing.assert_close(carried, whole[4:], rtol=0, atol=1e-12)
    assert (restarted - whole[4:]).abs().max() > 1e-6
    assert torch.equal(model(data, None)[0], whole)


@pytest.mark.parametrize("cell", CELLS)
def test_a_state_written_in_place_is_refused_not_continued(cell):
    """A reset written as for nn.LSTM (``h[:, i] = 0`` on the returned state) would leave ATN's
    windows those of the old values: refused, in words. What the error says to do instead (a new
    tensor) runs, as a fresh start."""
    model = build(partial(WordLM, cell=cell), normalized(cell, "atn")).eval()
    data = corpus(steps=9)
    _, hidden = model(data[:4], model.init_hidden(3))
    hidden = repackage_hidden(hidden)
    h = hidden[0] if cell == "lstm" else hidden
    h[:, 0] = 0
    with pytest.raises(ValueError, match="changed in place"):
        model(data[4:], hidden)
    rebuilt = tuple(s.clone() for s in hidden) if cell == "lstm" else hidden.clone()
    model(data[4:], rebuilt)


def _saved(state):
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize("write", ["h.data[:, 0] = 0", "h.data.zero_()", "h.numpy()[:, 0] = 0"])
@pytest.mark.parametrize("cell", CELLS)
def test_a_write_no_version_counter_of_h_sees_is_refused_too(cell, write):
    """``h.data`` and a NumPy view share h's values but not its version counter: a reset written
    through them (``h.data[:, done] = 0``, older nn.LSTM code) continued with the old windows (0.16
    off a fresh start). The values are compared too. A state left as returned, NaN included (a
    diverged run), still continues. ``detach_()`` of the state (a view of the model's output, as
    returned or loaded) is refused in words: torch detaches no view in place."""
    model = build(partial(WordLM, cell=cell), normalized(cell, "atn")).eval()
    data = corpus(steps=9)
    with torch.no_grad():
        _, hidden = model(data[:4], model.init_hidden(3))
        h = hidden[0] if cell == "lstm" else hidden
        exec(write, {"h": h})
        with pytest.raises(ValueError, match="changed in place"):
            model(data[4:], hidden)
        _, hidden = model(data[:4], model.init_hidden(3))
        h = hidden[0] if cell == "lstm" else hidden
        h.windows = h.windows  # as a diverged run returns it: NaN, attached as it is
        torch.Tensor.fill_(h.as_subclass(torch.Tensor), float("nan"))
        h.windows = h.windows
        model(data[4:], hidden)  # not refused: NaN is NaN
    for state in (hidden, torch.load(_saved(hidden), weights_only=False)):  # as returned, as loaded
        h = state[0] if cell == "lstm" else state
        with pytest.raises(RuntimeError, match=r"cannot detach in place: write h = h.detach\(\)"):
            h.detach_()  # torch's own words were about DistributedDataParallel's gradients


@pytest.mark.parametrize("norm", ["atn", "atn-bn"])
@pytest.mark.parametrize("cell", CELLS)
def test_an_evaluation_under_inference_mode_streams_as_under_no_grad(cell, norm):
    """torch.inference_mode() (Lightning's default for validation and test) makes tensors without a
    version counter: the windowed state's in-place check read it and failed on the first call. The
    state passed back under it continues exactly, and a write into it is still refused."""
    model = build(partial(WordLM, cell=cell), normalized(cell, norm)).eval()
    data = corpus(steps=9)
    with torch.no_grad():
        whole, _ = model(data, model.init_hidden(3))
    with torch.inference_mode():
        first, hidden = model(data[:4], model.init_hidden(3))
        second, _ = model(data[4:], hidden)
        torch.testing.assert_close(torch.cat((first, second)), whole, rtol=0, atol=1e-12)
        h = hidden[0] if cell == "lstm" else hidden
        assert h.is_inference() and windows_of(h) is not None
        h[:, 0] = 0
        with pytest.raises(ValueError, match="changed in place"):
            model(data[4:], hidden)


@pytest.mark.parametrize("cell", CELLS)
def test_the_older_spelling_h_data_keeps_the_windows_and_replacing_it_is_refused(cell):
    """``tuple(h.data for h in hidden)`` (older truncated-BPTT code) restarted ATN's windows
    silently; it continues as detach() does. ``h.data = ...`` advances no version counter: it
    continued with the old windows under new values; refused as a write in place is."""
    model = build(partial(WordLM, cell=cell), normalized(cell, "atn")).eval()
    data = corpus(steps=9)
    whole, _ = model(data, model.init_hidden(3))
    _, hidden = model(data[:4], model.init_hidden(3))
    old = tuple(s.data for s in hidden) if cell == "lstm" else hidden.data
    carried, _ = model(data[4:], old)
    torch.testing.assert_close(carried, whole[4:], rtol=0, atol=1e-12)
    h = old[0] if cell == "lstm" else old
    h.data = torch.zeros_like(h)
    with pytest.raises(ValueError, match="changed in place"):
        model(data[4:], old)


@pytest.mark.parametrize("cell", CELLS)
def test_windows_of_another_norm_or_k_are_refused_and_survive_save_and_detach(cell):
    """An ATN-LN state holds per-sequence windows, an ATN-BN one per-feature windows, a k=3 one
    two steps (which a k=5 model could take for a short history): each model takes only its own,
    through detach(), deepcopy and torch.save; a plain h (clone) starts afresh anywhere."""
    import copy
    import io

    RNN = CELLS[cell][0]
    x = torch.randn(5, 4, 3, dtype=DT)
    atn = RNN(3, 6, norm="atn", k=3).to(DT)
    _, state = atn(x)
    saved = io.BytesIO()
    torch.save(detach_state(state), saved)
    saved.seek(0)
    kept = [detach_state(state), copy.deepcopy(detach_state(state)), torch.load(saved)]
    for other in (RNN(3, 6, norm="atn-bn", k=3).to(DT), RNN(3, 6, norm="atn", k=5).to(DT)):
        for carried in kept:
            with pytest.raises(ValueError, match=f"made by a {RNN.__name__} norm='atn', k=3, 1 layer, .* model, and this model is "):
                other(x, carried)
        h = (state[0] if cell == "lstm" else state).detach().clone()
        other(x, (h, state[1].detach()) if cell == "lstm" else h)  # a plain tensor: fresh windows
    for carried in kept:
        torch.testing.assert_close(atn(x, carried)[0], atn(x, state)[0], rtol=0, atol=0)
    other_cell = (NormGRU if cell == "lstm" else NormLSTM)(3, 6, norm="atn", k=3).to(DT)  # windows of another cell
    h = detach_state(state)[0] if cell == "lstm" else detach_state(state)
    with pytest.raises(ValueError, match=f"made by a {RNN.__name__} norm='atn', k=3, 1 layer, .* model"):
        other_cell(x, h if cell == "lstm" else (h, torch.zeros_like(h)))


@pytest.mark.parametrize("cell", CELLS)
def test_windows_of_another_layout_or_bias_placement_are_refused_and_older_states_continue(cell):
    """One bidirectional layer's state has the shape, and its windows the count and sizes, of two
    layers of one direction's: continued there, it would be read in another order, silently.
    The layout and the bias placement are recorded with the windows; a state saved before they
    were (its ``made_by`` names cell, norm and k only) continues in a model of those."""
    RNN = CELLS[cell][0]
    x = torch.randn(5, 4, 3, dtype=DT)
    torch.manual_seed(0)
    two_layers = RNN(3, 6, num_layers=2, norm="atn", k=3).to(DT)
    _, state = RNN(3, 6, bidirectional=True, norm="atn", k=3).to(DT)(x)
    with pytest.raises(ValueError, match=f"k=3, 1 layer, bidirectional, bias inside model, and this model is "
                                         f"{RNN.__name__} norm='atn', k=3, 2 layers, unidirectional"):
        two_layers(x, detach_state(state))
    _, own = two_layers(x)
    outside = RNN(3, 6, num_layers=2, norm="atn", k=3, bias_inside=False).to(DT)
    with pytest.raises(ValueError, match="2 layers, unidirectional, bias inside model, and this model is .* bias outside"):
        outside(x, detach_state(own))
    older = detach_state(own)
    h = older[0] if cell == "lstm" else older
    assert h.made_by == f"{RNN.__name__} norm='atn', k=3, 2 layers, unidirectional, bias inside"
    h.made_by = f"{RNN.__name__} norm='atn', k=3"  # as saved before the layout was recorded
    torch.testing.assert_close(two_layers(x, older)[0], two_layers(x, own)[0], rtol=0, atol=0)
    with pytest.raises(ValueError, match="made by a .* norm='atn', k=3 model, and this model is .* k=5"):
        RNN(3, 6, num_layers=2, norm="atn", k=5).to(DT)(x, older)


@pytest.mark.parametrize("cell", CELLS)
def test_the_state_goes_by_nn_lstms_keyword_names(cell):
    """``rnn(input=x, hx=state)`` as client code calls ``nn.LSTM``; ``state=`` (the earlier name)
    is the same argument, and giving both is refused."""
    rnn = normalized(cell, "atn")(3, 4).to(DT)
    x = torch.randn(5, 2, 3, dtype=DT)
    first, state = rnn(x)
    by_position = rnn(x, state)[0]
    assert torch.equal(rnn(input=x, hx=state)[0], by_position)
    assert torch.equal(rnn(x, state=state)[0], by_position)
    with pytest.raises(TypeError, match="not both"):
        rnn(x, state, state=state)


@pytest.mark.parametrize("cell", CELLS)
def test_what_nn_lstm_refuses_is_refused_in_one_message(cell):
    """Sizes that are not ints, a projection, an unknown keyword, a dtype or a sequence length
    nn.LSTM refuses: one message each, not an error from deep inside; proj_size=0 is accepted."""
    RNN = CELLS[cell][0]
    with pytest.raises(TypeError, match="hidden_size should be of type int"):
        RNN(3, 4.0)
    with pytest.raises(TypeError, match="num_layers should be of type int"):
        RNN(3, 4, 2.0)
    with pytest.raises(ValueError, match="no projection"):
        RNN(3, 4, proj_size=2)
    with pytest.raises(TypeError, match="unknown keyword argument.*windw"):
        RNN(3, 4, windw=3)
    rnn = RNN(3, 4, proj_size=0, norm="atn", k=2)
    x = torch.randn(5, 2, 3)
    with pytest.raises(ValueError, match="input dtype"):
        rnn(x.double())
    _, state = rnn(x)
    as64 = tuple(s.double() for s in state) if cell == "lstm" else state.double()
    with pytest.raises(ValueError, match="state tensor 0 has dtype"):
        rnn(x, as64)
    with pytest.raises(ValueError, match="sequence length larger than 0"):
        rnn(x[:0])


@pytest.mark.parametrize("cell", CELLS)
def test_the_norms_options_are_checked_where_the_module_is_built(cell):
    """A window or eps of the wrong kind is refused by the constructor, naming the option, not at
    the first forward from inside a kernel (k=2.5 was a five-line C++ schema error there)."""
    RNN = CELLS[cell][0]
    for options, error, match in (({"k": 2.5}, TypeError, "k .* must be an integer, got 2.5"),
                                  ({"k": "3"}, TypeError, "must be an integer, got '3'"),
                                  ({"k": True}, TypeError, "must be an integer, got True"),
                                  ({"k": 0}, ValueError, "k must be >= 1"),
                                  ({"eps": "a"}, TypeError, "eps must be a number"),
                                  ({"eps": float("nan")}, ValueError, "eps must be a finite number"),
                                  ({"affine": "no"}, TypeError, "affine must be True or False"),
                                  ({"momentum": None}, TypeError, "momentum must be a number")):
        with pytest.raises(error, match=match):
            RNN(3, 4, norm="atn", **options)
    assert type(RNN(3, 4, norm="atn", k=np.int64(3)).spec.k) is int  # a NumPy integer is a window


def test_nn_lstms_arguments_are_taken_in_its_order_and_its_dropout_warning_once():
    """nn.LSTM(input, hidden, layers, bias, batch_first, dropout, bidirectional, proj_size, device,
    dtype) and nn.GRU's (no proj_size) by position too; a single layer's dropout warned of once."""
    lstm = NormLSTM(3, 4, 2, False, True, 0.0, True, 0, None, torch.float64, norm="ln")
    assert (lstm.num_layers, lstm.batch_first, lstm.bidirectional, lstm.layers[0].bias) == (2, True, True, None)
    assert lstm.layers[0].weight_ih.dtype == torch.float64
    assert NormGRU(3, 4, 1, True, False, 0.0, False, None, torch.float64).layers[0].weight_ih.dtype == torch.float64
    for norm in ("none", "atn"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            NormLSTM(3, 4, 1, dropout=0.5, norm=norm)
        assert [str(w.message).count("non-zero dropout") for w in caught] == [1], norm


def test_what_nn_lstm_takes_beside_the_state_is_taken():
    """A state given as a list [h_0, c_0], dropout 1.0 on a stack, and nn.LSTM's warning for
    dropout on a single layer (where it does nothing)."""
    rnn = NormLSTM(3, 4, 2, dropout=1.0, norm="atn", k=2)
    x = torch.randn(5, 2, 3)
    _, (h, c) = rnn(x)
    assert torch.equal(rnn.eval()(x, [h, c])[0], rnn(x, (h, c))[0])
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        NormLSTM(3, 4, 1, dropout=0.5)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        NormLSTM(3, 4, 2, dropout=1.5)


@pytest.mark.parametrize("cell", CELLS)
def test_a_norm_none_checkpoint_loads_on_every_backend_and_into_a_normalized_model(cell):
    """norm="none" on torch's kernel keeps its weights under ``rnn.``: they load into the loop
    backend (the same outputs) and, with strict=False, into an ATN model's recurrent weights;
    the loop backend's weights load into torch's kernel."""
    RNN = CELLS[cell][0]
    torch.manual_seed(0)
    fused = RNN(3, 4, 2, norm="none").to(DT)
    loop = RNN(3, 4, 2, norm="none", backend="loop").to(DT)
    loop.load_state_dict(fused.state_dict())
    x = torch.randn(5, 2, 3, dtype=DT)
    torch.testing.assert_close(loop(x)[0], fused(x)[0], rtol=0, atol=1e-12)
    atn = RNN(3, 4, 2, norm="atn", k=2).to(DT)
    missing, unexpected = atn.load_state_dict(fused.state_dict(), strict=False)
    assert unexpected == [] and all(".norm_" in name for name in missing)
    assert torch.equal(atn.layers[1].weight_hh, fused.rnn.weight_hh_l1)
    for bidirectional in (False, True):  # and back: the loop backend's layers.N keys into torch's kernel
        source = RNN(3, 4, 2, norm="none", backend="loop", bidirectional=bidirectional).to(DT)
        into = RNN(3, 4, 2, norm="none", bidirectional=bidirectional).to(DT)
        into.load_state_dict(source.state_dict())
        torch.testing.assert_close(into(x)[0], source(x)[0], rtol=0, atol=1e-12)
    with pytest.raises(RuntimeError, match="Unexpected key.*layers.0.norm_"):  # a normalization's gains: said
        fused.load_state_dict(RNN(3, 4, 2, norm="ln", backend="loop").to(DT).state_dict())


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm, backend", (("none", "auto"), ("none", "loop"), ("atn", "auto"), ("bn", "auto")))
def test_an_nn_lstm_checkpoint_missing_a_tensor_loads_the_others_as_nn_lstm_does(cell, norm, backend):
    """strict=False with a checkpoint that lacks one tensor: nn.LSTM loads the rest and reports
    that one missing; so does the drop-in (it had loaded none of them, and said nothing)."""
    RNN, Torch = CELLS[cell]
    torch.manual_seed(0)
    ref = Torch(3, 4, 2).to(DT)
    partial_dict = {k: v for k, v in ref.state_dict().items() if k != "bias_hh_l1"}
    model = RNN(3, 4, 2, norm=norm, backend=backend).to(DT)
    if cell == "gru" and norm == "bn":  # nn.GRU's b_hn has no place outside the norms (refused, as documented)
        with pytest.raises(ValueError, match="b_hn"):
            model.load_state_dict(partial_dict, strict=False)
        return
    missing, unexpected = model.load_state_dict(partial_dict, strict=False)
    assert any("bias_hh" in key or key.endswith(".bias") for key in missing) and len(missing) >= 1
    for layer in (0, 1):
        assert torch.equal(getattr(model, f"weight_hh_l{layer}"), ref.state_dict()[f"weight_hh_l{layer}"])
    if norm == "bn":  # one bias outside: layer 1's needs both of nn.LSTM's, so it is reported, not guessed
        assert unexpected == ["bias_ih_l1"] and "layers.1.bias" in missing
    else:
        assert unexpected == [] and torch.equal(model.bias_ih_l1, ref.bias_ih_l1)


def client_init(rnn, layers: int, hidden: int) -> None:
    """Initialisation as client code writes it for nn.LSTM, by attribute names: the second gate's
    input bias set to 1 (the LSTM's forget gate), the recurrent weights drawn again."""
    g = torch.Generator().manual_seed(3)
    for i in range(layers):
        for suffix in ("", "_reverse"):
            getattr(rnn, f"bias_ih_l{i}{suffix}").data[hidden:2 * hidden].fill_(1.0)
            weight = getattr(rnn, f"weight_hh_l{i}{suffix}")
            with torch.no_grad():
                weight.copy_(torch.randn(weight.shape, generator=g, dtype=weight.dtype))


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("backend", ("auto", "loop"))
def test_nn_lstms_parameter_attributes_are_the_layers_own(cell, backend):
    """``rnn.bias_ih_l0``, ``rnn.weight_hh_l1_reverse``: read, written in place and assigned as
    client code does with nn.LSTM, they are the layers' own parameters (the same outputs as the
    nn.LSTM client's after the same initialisation). A bias outside the normalizations is one
    per layer, and is named; names nn.LSTM would not have are missing attributes."""
    RNN, Torch = CELLS[cell]
    torch.manual_seed(0)
    ref = Torch(3, 4, 2, bidirectional=True).to(DT)
    model = RNN(3, 4, 2, bidirectional=True, norm="none", backend=backend).to(DT)
    model.load_state_dict(ref.state_dict())
    for rnn in (ref, model):
        client_init(rnn, layers=2, hidden=4)
    x = torch.randn(5, 2, 3, dtype=DT)
    torch.testing.assert_close(model(x)[0], ref(x)[0], rtol=0, atol=1e-12)
    assert sorted(model.torch_state_dict()) == sorted(ref.state_dict())
    for name in ("proj_size", "bias", "hidden_size", "num_layers", "bidirectional", "batch_first"):
        assert getattr(model, name) == getattr(ref, name), name
    assert RNN(3, 4, bias=False).bias is False
    atn = RNN(3, 4, 2, bidirectional=True, norm="atn", k=2).to(DT)
    assert atn.bias_hh_l1_reverse is atn.layers[3].bias_hh and atn.weight_ih_l1 is atn.layers[2].weight_ih
    replacement = nn.Parameter(torch.zeros_like(atn.layers[1].weight_hh))
    atn.weight_hh_l0_reverse = replacement  # as nn.LSTM: the layer's parameter is replaced
    assert atn.layers[1].weight_hh is replacement and "weight_hh_l0_reverse" not in dict(atn.named_parameters())
    assert sum(p is replacement for p in atn.parameters()) == 1
    for norm, home in (("none", "rnn.weight_ih_l1" if backend == "auto" else "layers.2.weight_ih"),
                       ("atn", "layers.2.weight_ih")):  # a plain tensor: refused before anything changed
        rnn = RNN(3, 4, 2, bidirectional=True, norm=norm, k=2, backend=backend).to(DT)
        before = rnn(x)[0]
        with pytest.raises(TypeError, match=rf"functional_call takes the layer's name, {re.escape(home)}\)"):
            torch.func.functional_call(rnn, {"weight_ih_l1": torch.zeros_like(rnn.weight_ih_l1)}, (x,), strict=False)
        assert torch.equal(rnn(x)[0], before)
    with pytest.raises(AttributeError, match=r"norm='bn' has one bias per layer, outside the normalizations, "
                                             rf"not nn\.{Torch.__name__}'s two: layers\[2\]\.bias"):
        RNN(3, 4, 2, bidirectional=True, norm="bn").bias_ih_l1
    before = atn(x)[0]  # weight norm as docs/library.md says to apply it: to the layer, by its name
    torch.nn.utils.parametrizations.weight_norm(atn.layers[2], "weight_hh")
    torch.testing.assert_close(atn(x)[0], before, rtol=1e-12, atol=1e-12)
    assert "layers.2.parametrizations.weight_hh.original0" in dict(atn.named_parameters())
    for missing, kwargs in (("weight_ih_l2", {}), ("bias_hh_l0_reverse", {}), ("bias_ih_l0", {"bias": False})):
        assert not hasattr(RNN(3, 4, 2, norm="ln", **kwargs), missing)
        assert not hasattr(Torch(3, 4, 2, **kwargs), missing)  # as nn.LSTM


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("backend", ("auto", "loop"))
def test_language_model_none_equals_torch(cell, backend):
    """norm="none": the nn.LSTM / nn.GRU client's state dict loads into the NormLSTM client,
    and a training epoch gives the same losses and weights (the same dropout masks)."""
    client = partial(WordLM, cell=cell, dropout=0.2 if backend == "auto" else 0.0)
    ref = build(client, CELLS[cell][1])
    model = build(client, normalized(cell, "none", backend), seed=1)
    model.load_state_dict(ref.state_dict())
    runs = []
    for m in (ref, model):
        torch.manual_seed(5)
        runs.append(train_lm(m, corpus(steps=17)))
    assert runs[1] == pytest.approx(runs[0], rel=0, abs=1e-12)
    for name, value in ref.rnn.state_dict().items():
        torch.testing.assert_close(model.rnn.torch_state_dict()[name], value, rtol=0, atol=1e-12)
    torch.testing.assert_close(model.encoder.weight, ref.encoder.weight, rtol=0, atol=1e-12)


def test_docs_one_line_changes_build_the_clients_rnn():
    """docs/library.md's two ``+`` lines, as written, build the normalized RNN of each client."""
    import re
    from pathlib import Path
    from types import SimpleNamespace

    text = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text()
    diffs = re.findall(r"```diff\n(.+?)\n```", text[text.index("## The one-line change"):], re.S)
    assert len(diffs) == 2
    built = []
    for diff, rnn_type in zip(diffs, ("LSTM", "GRU")):
        added = "\n".join(line[1:] for line in diff.splitlines() if line.startswith("+"))
        scope = dict(self=SimpleNamespace(), nn=nn, NormLSTM=NormLSTM, NormGRU=NormGRU, rnn_type=rnn_type,
                     embedding_dim=6, hidden_dim=5, n_layers=2, dropout=0.25, ninp=6, nhid=5, nlayers=2)
        exec(compile("if True:\n" + added, "docs/library.md", "exec"), scope)
        built.append(scope["self"].rnn)
    assert type(built[0]) is NormLSTM and built[0].bidirectional and built[0].batch_first
    assert type(built[1]) is NormGRU and built[1].num_layers == 2
    assert all(rnn.norm == "atn" and rnn.spec.k == 10 for rnn in built)


@pytest.mark.parametrize("cell", CELLS)
def test_a_full_backward_hook_that_drops_the_windows_is_said(cell):
    """torch rebuilds a module's top-level outputs for a full backward hook: a GRU's bare h_n comes
    back plain and the next segment restarted ATN's windows silently (0.24 off one pass); a warning
    says so. An LSTM's (h_n, c_n) is out of the hook's reach: it keeps them, and no warning."""
    import warnings

    RNN = CELLS[cell][0]
    model = RNN(3, 4, norm="atn", k=2).to(DT)
    model.register_full_backward_hook(lambda *args: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, state = model(torch.randn(5, 2, 3, dtype=DT))
    said = [str(w.message) for w in caught if "full backward hook" in str(w.message)]
    h = state[0] if cell == "lstm" else state
    assert (windows_of(h) is None) == (cell == "gru") and len(said) == (cell == "gru")


@pytest.mark.parametrize("route", ["detach", "repackage_hidden", "data", "deepcopy", "torch.save", "pickle"])
@pytest.mark.parametrize("cell", CELLS)
def test_a_state_written_then_detached_copied_or_saved_stays_refused(cell, route):
    """`h[:, done] = 0` then `repackage_hidden` (the usual order in truncated-BPTT and RL loops) was
    accepted with the old windows (0.65 off a restart): every copy of a written state took a fresh
    snapshot of the written values. The mark travels with the copy, through a file too."""
    import copy
    import pickle

    model = build(partial(WordLM, cell=cell), normalized(cell, "atn")).eval()
    data = corpus(steps=9)
    with torch.no_grad():
        _, hidden = model(data[:4], model.init_hidden(3))
    h = hidden[0] if cell == "lstm" else hidden
    with torch.no_grad():
        h[:, 0] = 0
    copied = {"detach": lambda s: detach_state(s), "repackage_hidden": repackage_hidden,
              "data": lambda s: tuple(t.data for t in s) if cell == "lstm" else s.data,
              "deepcopy": lambda s: copy.deepcopy(detach_state(s)),
              "torch.save": lambda s: torch.load(_saved(detach_state(s))),
              "pickle": lambda s: pickle.loads(pickle.dumps(detach_state(s)))}[route](hidden)
    with pytest.raises(ValueError, match="changed in place"):
        model(data[4:], copied)
