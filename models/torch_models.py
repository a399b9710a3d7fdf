"""Neural lifetime models in PyTorch: MLP (DOGI), DeepFM, GRU (PHFTL/Shiro), TCN (ML-DT).

Training: Adam, cross-entropy (or mean squared error for the TCN's ``task: regression``, ML-DT's
regression of the log invalidation time), mini-batches in time order shuffled within the training split
only (never across splits), early stopping on validation loss, deterministic given a seed
(one thread, deterministic algorithms).
"""

from __future__ import annotations

import copy
import math
import threading
import time
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from dogi_ml.errors import ConfigError
from dogi_ml.progress import bar as progress_bar

from .base import LifetimeModel, Param, register_model


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    torch.use_deterministic_algorithms(True)


def _show(bar, record: dict) -> None:
    """One epoch done on the training bar, its losses in the postfix (early stopping may end it
    before the total: the bar then closes short)."""
    bar.set_postfix({k: f"{record[k]:.4f}" for k in ("train_loss", "val_loss") if k in record}, refresh=False)
    bar.update(1)


#: a dropout probability: 1 would drop every unit (and the numba trainer divides by 1 - p)
DROPOUT = Param(float, minimum=0, below=1, example=0.2)


@contextmanager
def fits_in_memory(model: LifetimeModel):
    """A network too large to allocate (a width or kernel of 1e12) is the size settings' fault:
    one line naming them (:attr:`_TorchModel.size_params`), not PyTorch's allocator traceback."""
    try:
        yield
    except (MemoryError, RuntimeError) as exc:
        if isinstance(exc, RuntimeError) and "allocate" not in str(exc):
            raise
        sizes = ", ".join(f"{model.where}.{k}={model.params[k]}" for k in model.size_params)
        raise ConfigError(
            f"model {model.name}'s network does not fit in memory ({sizes})",
            f"give smaller sizes (conf/model/{model.name}.yaml has the defaults)",
        ) from None


def check_finite_loss(model: LifetimeModel, loss: float, epoch: int) -> None:
    """A training loss that is NaN or infinite means the weights diverged (a learning rate far too
    high): the model would go on to predict one class for every row without a word."""
    if not math.isfinite(loss):
        raise ConfigError(
            f"model {model.name}'s training diverged: the training loss is {loss} after epoch {epoch + 1}",
            f"lower {model.where}.lr (now {model.params['lr']})",
        )


class _TorchModel(LifetimeModel):
    defaults = {"lr": 3e-4, "weight_decay": 1e-5, "batch_size": 128, "epochs": 15, "patience": 3, "threads": 1}
    rules = {
        "lr": Param(float, above=0, example=0.0003),
        "weight_decay": Param(float, minimum=0, example=0.00001),
        "batch_size": Param(int, minimum=1, example=128),
        "epochs": Param(int, minimum=1, example=15),
        # 0 stopped after the first epoch whether or not it improved
        "patience": Param(int, minimum=1, example=3),
        "threads": Param(int, minimum=1, example=1),
    }
    #: the parameters that set the network's size (named when it does not fit in memory)
    size_params: tuple = ()

    def build(self) -> nn.Module:  # pragma: no cover - abstract
        raise NotImplementedError

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.net.parameters()) if hasattr(self, "net") else 0

    def _fit(self, X, y, X_val, y_val):
        p = self.params
        torch.set_num_threads(int(p["threads"]))
        _seed_everything(self.seed)
        with fits_in_memory(self):
            self.net = self.build()
        opt = torch.optim.Adam(self.net.parameters(), lr=p["lr"], weight_decay=p["weight_decay"], fused=True)
        loss_fn = self._loss_fn()
        Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        gen = torch.Generator().manual_seed(self.seed)
        best, best_state, bad = float("inf"), None, 0
        bs = int(p["batch_size"])
        bar = progress_bar(int(p["epochs"]), f"train {self.name}", "epoch")
        for epoch in range(int(p["epochs"])):
            t0 = time.perf_counter()
            self.net.train()
            order = torch.randperm(len(Xt), generator=gen)
            total = 0.0
            for i in range(0, len(Xt), bs):
                idx = order[i : i + bs]
                opt.zero_grad()
                loss = loss_fn(self._forward(Xt[idx]), yt[idx])
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            record = {"epoch": epoch, "train_loss": total / len(Xt), "seconds": time.perf_counter() - t0}
            check_finite_loss(self, record["train_loss"], epoch)
            if X_val is not None and len(X_val):
                val = self._loss(X_val, y_val, loss_fn)
                record["val_loss"] = val
                if val < best - 1e-4:
                    best, best_state, bad = val, copy.deepcopy(self.net.state_dict()), 0
                else:
                    bad += 1
            self.history.append(record)
            _show(bar, record)
            if X_val is not None and bad >= int(p["patience"]):
                break
        bar.close()
        if best_state is not None:
            self.net.load_state_dict(best_state)
        self.net.eval()

    def _loss_fn(self) -> nn.Module:
        return nn.CrossEntropyLoss()

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output as the loss takes it (logits; subclasses may reshape)."""
        return self.net(x)

    def _loss(self, X, y, loss_fn) -> float:
        self.net.eval()
        with torch.no_grad():
            return float(loss_fn(self._logits(X), torch.from_numpy(y)))

    def _logits(self, X) -> torch.Tensor:
        out = []
        with torch.no_grad():
            for i in range(0, len(X), 8192):
                out.append(self._forward(torch.from_numpy(np.ascontiguousarray(X[i : i + 8192]))))
        return torch.cat(out) if out else torch.empty(0, self.n_classes)

    def _proba(self, X):
        return torch.softmax(self._logits(X), dim=1).numpy()

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_np_layers", None)
        if "net" in state:
            state["net_state"] = {k: v.cpu() for k, v in state.pop("net").state_dict().items()}
        return state

    def __setstate__(self, state):
        net_state = state.pop("net_state", None)
        self.__dict__.update(state)
        if net_state is not None:
            self.net = self.build()
            self.net.load_state_dict(net_state)
            self.net.eval()


@register_model
class MLP(_TorchModel):
    """DOGI's model: inputs -> 32 -> 32 -> classes, ReLU, dropout 0.4 (about 1.6K parameters
    with 6 inputs and 10 classes).

    ``backend: numba`` (default) trains with the same arithmetic as PyTorch (same
    initialisation scheme, Adam, dropout, cross-entropy; see ``dogi_ml.models.mlp_numba``) at ~20x the
    speed; ``backend: torch`` uses PyTorch. Either way ``net`` is a PyTorch module after
    training (for ONNX export)."""

    name = "mlp"
    defaults = {**_TorchModel.defaults, "hidden": [32, 32], "dropout": 0.4, "backend": "numba"}
    rules = {
        **_TorchModel.rules,
        "hidden": Param(list, example=[32, 32]),  # [] is a linear model: inputs -> classes
        "dropout": DROPOUT,
        "backend": Param(str, choices=("numba", "torch")),
    }
    size_params = ("hidden",)

    def _fit(self, X, y, X_val, y_val):
        self._np_layers = None
        if self.params["backend"] == "torch":
            return super()._fit(X, y, X_val, y_val)
        from .mlp_numba import NumbaMLPTrainer

        p = self.params
        sizes = [self.n_features, *p["hidden"], self.n_classes]
        with fits_in_memory(self):
            tr = NumbaMLPTrainer(sizes, self.seed, p["lr"], p["weight_decay"], p["dropout"])
        rng = np.random.Generator(np.random.PCG64(self.seed))
        best, best_w, bad = float("inf"), None, 0
        bar = progress_bar(int(p["epochs"]), f"train {self.name}", "epoch")
        for epoch in range(int(p["epochs"])):
            t0 = time.perf_counter()
            loss = tr.epoch(X, y, rng.permutation(len(X)), int(p["batch_size"]), self.seed * 1000 + epoch)
            record = {"epoch": epoch, "train_loss": loss, "seconds": time.perf_counter() - t0}
            check_finite_loss(self, loss, epoch)
            if X_val is not None and len(X_val):
                z = tr.logits(X_val).astype(np.float64)
                z -= z.max(axis=1, keepdims=True)
                val = float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y_val)), y_val]))
                record["val_loss"] = val
                if val < best - 1e-4:
                    best, best_w, bad = val, tr.weights(), 0
                else:
                    bad += 1
            self.history.append(record)
            _show(bar, record)
            if X_val is not None and bad >= int(p["patience"]):
                break
        bar.close()
        if best_w is not None:
            tr.set_weights(best_w)
        self.net = self.build()
        with torch.no_grad():
            linears = [m for m in self.net if isinstance(m, nn.Linear)]
            for lin, (w, b) in zip(linears, tr.weights()):
                lin.weight.copy_(torch.from_numpy(w.T.copy()))
                lin.bias.copy_(torch.from_numpy(b))
        self.net.eval()

    def _proba(self, X):
        # plain numpy matrix products: at batch 1 PyTorch's dispatch costs 10x the arithmetic
        if getattr(self, "_np_layers", None) is None:
            self._np_layers = [
                (m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
                for m in self.net
                if isinstance(m, nn.Linear)
            ]
        h = np.asarray(X, np.float32)
        for i, (w, b) in enumerate(self._np_layers):
            h = h @ w + b
            if i < len(self._np_layers) - 1:
                np.maximum(h, 0, out=h)
        h = h - h.max(axis=1, keepdims=True)
        e = np.exp(h)
        return e / e.sum(axis=1, keepdims=True)

    def build(self):
        layers, width = [], self.n_features
        for h in self.params["hidden"]:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(self.params["dropout"])]
            width = h
        layers.append(nn.Linear(width, self.n_classes))
        return nn.Sequential(*layers)


class _DeepFMNet(nn.Module):
    def __init__(self, n_features, n_classes, k, hidden, dropout):
        super().__init__()
        # dense features: each feature i has an embedding vector v_i scaled by its value
        self.v = nn.Parameter(torch.randn(n_features, k) * 0.01)
        self.linear = nn.Linear(n_features, n_classes)
        layers, width = [], n_features * k
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, n_classes))
        self.deep = nn.Sequential(*layers)
        self.fm_out = nn.Linear(1, n_classes)

    def forward(self, x):
        e = x.unsqueeze(-1) * self.v  # [n, F, k]
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1, keepdim=True)  # pairwise interactions
        return self.linear(x) + self.fm_out(fm) + self.deep(e.flatten(1))


@register_model
class DeepFM(_TorchModel):
    """DeepFM (Guo et al.) on dense features: linear + factorisation-machine interactions +
    an MLP over the feature embeddings."""

    name = "deepfm"
    defaults = {**_TorchModel.defaults, "embedding": 8, "hidden": [64, 32], "dropout": 0.2}
    rules = {
        **_TorchModel.rules,
        # 0 made every embedding empty: the network trained and predicted one class
        "embedding": Param(int, minimum=1, example=8),
        "hidden": Param(list, example=[64, 32]),
        "dropout": DROPOUT,
    }
    size_params = ("embedding", "hidden")

    def build(self):
        p = self.params
        return _DeepFMNet(self.n_features, self.n_classes, int(p["embedding"]), p["hidden"], p["dropout"])


class _GRUNet(nn.Module):
    def __init__(self, n_features, n_classes, hidden):
        super().__init__()
        self.gru = nn.GRU(n_features, hidden, num_layers=1, batch_first=True)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x, h0=None):
        out, h = self.gru(x, h0)
        return self.head(out[:, -1])

    def step(self, x, h):
        """One step: features of the newest write, the LBA's hidden state -> logits, new state."""
        out, h = self.gru(x.unsqueeze(1), h)
        return self.head(out[:, -1]), h


@register_model
class GRU(_TorchModel):
    """One GRU layer, hidden 32 (PHFTL/Shiro), over an LBA's recent feature history. Inference
    can keep each LBA's hidden state so a prediction is one step (:meth:`step`)."""

    name = "gru"
    sequence = True
    defaults = {**_TorchModel.defaults, "hidden": 32, "lr": 1e-3}
    rules = {
        **_TorchModel.rules,
        "hidden": Param(int, minimum=1, example=32),
        "lr": Param(float, above=0, example=0.001),
    }
    size_params = ("hidden",)

    def build(self):
        return _GRUNet(self.n_features, self.n_classes, int(self.params["hidden"]))

    def step(self, x_scaled: np.ndarray, h: torch.Tensor | None):
        with torch.no_grad():
            logits, h = self.net.step(torch.from_numpy(x_scaled), h)
        return logits.numpy(), h


class _Chomp(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x[:, :, : -self.n] if self.n else x


_scratch = threading.local()  # forward_last's buffers: threads may infer with one network at once


class _Taps(NamedTuple):
    """One convolution's reads at ``positions`` output positions, per tap: the first row of
    the padded position-major input it reads (row 0 is the causal zero padding) and, when
    its rows are not consecutive, all of them (``rows``, else ``None``: a slice, no copy)."""

    positions: int
    first: list
    rows: list


def _consecutive(rows: list) -> bool:
    """Whether ``rows`` are ``r, r + 1, ...``: a slice reads them without a copy."""
    return rows == list(range(rows[0], rows[0] + len(rows)))


def _taps(want: list, have: list, offsets: list) -> _Taps:
    """For output positions ``want`` and tap offsets ``offsets``, which rows of the padded
    input (``have``'s positions shifted by one; 0 before the window) each tap reads."""
    row = {p: i + 1 for i, p in enumerate(have)}
    first, rows = [], []
    for o in offsets:
        r = [row.get(p - o, 0) for p in want]
        first.append(r[0])
        rows.append(None if _consecutive(r) else torch.tensor(r, dtype=torch.long))
    return _Taps(len(want), first, rows)


class _TCNNet(nn.Module):
    def __init__(self, n_features, n_classes, channels, kernel, dropout):
        super().__init__()
        blocks, width = [], n_features
        for i, ch in enumerate(channels):
            d = 2**i
            pad = (kernel - 1) * d
            blocks.append(
                nn.Sequential(
                    nn.Conv1d(width, ch, kernel, padding=pad, dilation=d),
                    _Chomp(pad),
                    nn.ReLU(),
                    nn.Dropout(dropout),
                    nn.Conv1d(ch, ch, kernel, padding=pad, dilation=d),
                    _Chomp(pad),
                    nn.ReLU(),
                    nn.Dropout(dropout),
                )
            )
            width = ch
        self.blocks = nn.ModuleList(blocks)
        self.skips = nn.ModuleList(
            nn.Conv1d(w, c, 1) if w != c else nn.Identity()
            for w, c in zip([n_features] + list(channels[:-1]), channels)
        )
        self.head = nn.Linear(width, n_classes)
        self._plans: dict = {}  # window length -> _plan

    def forward(self, x):
        """The head on the last position's features. In eval mode without autograd only the
        positions that output depends on are computed (:meth:`forward_last`); training, gradients
        and ONNX export run every position (:meth:`forward_all`)."""
        if self.training or torch.is_grad_enabled() or torch.onnx.is_in_onnx_export():  # ONNX: any window length
            return self.forward_all(x)
        return self.forward_last(x)

    def forward_all(self, x):
        h = x.transpose(1, 2)  # [n, F, T]
        for block, skip in zip(self.blocks, self.skips):
            h = torch.relu(block(h) + skip(h))  # residual, causal (chomped) convolutions
        return self.head(h[:, :, -1])

    def _plan(self, T: int) -> list:
        """Per block, backwards from the last position: the input positions it reads, the
        :class:`_Taps` of its two convolutions, and the input rows of its residual (the
        block's output positions)."""
        if T in self._plans:
            return self._plans[T]
        k = self.blocks[0][0].kernel_size[0]
        out_pos = [T - 1]
        plan = []
        for b in reversed(range(len(self.blocks))):
            d = self.blocks[b][0].dilation[0]
            offsets = [(k - 1 - j) * d for j in range(k)]  # tap j reads position t - (k - 1 - j) d
            mid_pos = sorted({p - o for p in out_pos for o in offsets if p - o >= 0})
            in_pos = sorted({q - o for q in mid_pos for o in offsets if q - o >= 0} | set(out_pos))
            residual = torch.tensor([in_pos.index(p) for p in out_pos], dtype=torch.long)
            plan.append((in_pos, _taps(mid_pos, in_pos, offsets), _taps(out_pos, mid_pos, offsets), residual))
            out_pos = in_pos
        plan.reverse()
        self._plans[T] = plan
        return plan

    @staticmethod
    def _buffer(x, slot, shape: tuple):
        """This thread's scratch buffer ``slot`` viewed as ``shape``, grown as needed: fresh
        megabyte buffers per batch cost more in page faults than the products that fill them."""
        size = math.prod(shape)
        buffers = getattr(_scratch, "buffers", None)
        if buffers is None:
            buffers = _scratch.buffers = {}
        flat = buffers.get(slot)
        if flat is None or flat.numel() < size or flat.dtype != x.dtype:
            flat = buffers[slot] = x.new_empty(size)
        return flat[:size].view(shape)

    @classmethod
    def _padded(cls, x, slot: int, positions: int, channels: int):
        """Position-major scratch ``[1 + positions, n, channels]`` with row 0 (the causal zero
        padding) zeroed."""
        buf = cls._buffer(x, slot, (1 + positions, x.shape[0], channels))
        buf[0].zero_()
        return buf

    @classmethod
    def _rows(cls, h, rows):
        """Rows ``rows`` of the position-major ``h``, gathered into scratch."""
        out = cls._buffer(h, ("rows", h.shape[2]), (len(rows), h.shape[1], h.shape[2]))
        return torch.index_select(h, 0, rows, out=out)

    @classmethod
    def _conv_into(cls, conv, padded, taps: _Taps, out):
        """``conv`` (Conv1d) at ``taps.positions`` positions of the position-major ``padded``
        input, into ``out [positions n, C_out]``: one matrix product per tap, each reading a
        contiguous block of rows (a slice when the tap's rows are consecutive)."""
        S, n = taps.positions, padded.shape[1]
        for j, (first, rows) in enumerate(zip(taps.first, taps.rows)):
            src = padded[first : first + S] if rows is None else cls._rows(padded, rows)
            src = src.reshape(S * n, padded.shape[2])
            w = conv.weight[:, :, j].t()
            if j == 0:
                torch.addmm(conv.bias, src, w, out=out)
            else:
                out.addmm_(src, w)

    def forward_last(self, x):
        """:meth:`forward_all`'s output computing only what the last position depends on (kernel
        3, dilations 1 and 2 over 8 writes: 30k of the 80k multiply-adds per window).
        Activations are position-major (``[position, n, channels]``), so a convolution is one
        matrix product per tap on a block of rows, mostly a slice: no gather of patches (which
        took half the time), no concatenation; within float rounding (1e-6) of :meth:`forward_all`.
        Inference only: it writes into scratch in place, which autograd cannot follow."""
        n, T, F = x.shape
        plan = self._plan(T)
        positions = plan[0][0]
        h = self._padded(x, 0, len(positions), F)
        window = x.transpose(0, 1)
        if _consecutive(positions):
            h[1:].copy_(window[positions[0] : positions[-1] + 1])
        else:
            h[1:].copy_(window[positions])
        for b, ((_, mid_taps, out_taps, residual), block, skip) in enumerate(zip(plan, self.blocks, self.skips)):
            conv1, conv2 = block[0], block[4]
            mid = self._padded(x, 2 * b + 1, mid_taps.positions, conv1.out_channels)
            self._conv_into(conv1, h, mid_taps, mid[1:].view(-1, conv1.out_channels))
            mid[1:].relu_()
            nxt = self._padded(x, 2 * b + 2, out_taps.positions, conv2.out_channels)
            out = nxt[1:].view(-1, conv2.out_channels)
            self._conv_into(conv2, mid, out_taps, out)
            out.relu_()
            res = self._rows(h[1:], residual).reshape(out.shape[0], -1)
            if isinstance(skip, nn.Conv1d):  # 1x1: a matrix product on channels
                out.addmm_(res, skip.weight[:, :, 0].t())
                out.add_(skip.bias)
            else:
                out.add_(res)
            out.relu_()
            h = nxt
        return self.head(h[-1])  # a new tensor: the scratch is reused by the next call


@register_model
class TCN(_TorchModel):
    """Temporal convolutional network (as ML-DT): residual blocks of dilated causal 1-D
    convolutions over an LBA's feature history; deeper and larger than the GRU."""

    name = "tcn"
    sequence = True
    defaults = {
        **_TorchModel.defaults,
        "channels": [64, 64, 64],
        "kernel": 3,
        "dropout": 0.1,
        "lr": 1e-3,
        "task": "classification",
    }
    rules = {
        **_TorchModel.rules,
        # at least one block: the inference path (forward_last) walks the blocks' plan
        "channels": Param(list, empty=False, example=[64, 64, 64]),
        "kernel": Param(int, minimum=1, example=3),
        "dropout": DROPOUT,
        "lr": Param(float, above=0, example=0.001),
        "task": Param(str, choices=("classification", "regression")),
    }
    size_params = ("channels", "kernel")

    @property
    def regression(self) -> bool:
        """``task: regression``: one output, mean squared error on real-valued targets (ML-DT
        regresses ``log2(1 + invalidation time)``); ``n_classes`` is then ignored."""
        task = self.params.get("task", "classification")
        if task not in ("classification", "regression"):
            raise ValueError(f"model tcn: task must be classification or regression, got {task!r}")
        return task == "regression"

    def build(self):
        p = self.params
        n_out = 1 if self.regression else self.n_classes
        return _TCNNet(self.n_features, n_out, list(p["channels"]), int(p["kernel"]), float(p["dropout"]))

    def _loss_fn(self) -> nn.Module:
        return nn.MSELoss() if self.regression else nn.CrossEntropyLoss()

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        return out.squeeze(-1) if self.regression else out

    def fit(self, X, y, X_val=None, y_val=None) -> TCN:
        if not self.regression:
            return super().fit(X, y, X_val, y_val)
        # the base class casts targets to class indices; regression keeps them real, and
        # standardised (the network starts near the mean instead of near zero)
        self._check(X)
        self.scaler.fit(X)
        y = np.asarray(y, np.float64)
        self.y_mean = float(y.mean()) if y.size else 0.0
        self.y_std = float(y.std()) if y.size and y.std() > 0 else 1.0

        def norm(t):
            return ((np.asarray(t, np.float64) - self.y_mean) / self.y_std).astype(np.float32)

        Xv = None if X_val is None else self.scaler.transform(X_val)
        self._fit(self.scaler.transform(X), norm(y), Xv, None if y_val is None else norm(y_val))
        return self

    def predict(self, X) -> np.ndarray:
        """Classes, or (``task: regression``) the regressed values as float32."""
        if not self.regression:
            return super().predict(X)
        self._check(X)
        z = self._logits(self.scaler.transform(X)).numpy().reshape(-1).astype(np.float64)
        return (z * self.y_std + self.y_mean).astype(np.float32)

    def _proba(self, X):
        if self.regression:
            raise ValueError("model tcn: task=regression has no class probabilities; use predict()")
        return super()._proba(X)
