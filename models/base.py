"""The model interface and registry.

A model maps a feature matrix ``X`` (rows = block writes, columns = features, integers) to a
class. Inputs are transformed the same way for every model (:class:`InputScaler`): count- and
time-like features through ``log2(1 + x)``, then standardised with the training set's mean and
deviation (as the DOGI authors' code does), so models see comparable scales. Sequence models
take ``[n, history, features]`` arrays.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError, checked_setting

MODELS: dict[str, type] = {}


@dataclass(frozen=True)
class Param:
    """How one model parameter is checked, before any model is built (:func:`make_model`):
    ``kind`` ``int``, ``float`` or ``bool`` with :func:`~dogi_ml.errors.checked_setting`'s bounds,
    ``str``: one of ``choices``, or ``list``: layer widths, each a whole number >= 1 (``empty``:
    whether ``[]``, no layer, is allowed). Without these checks a bad value became a traceback
    from deep in PyTorch or LightGBM, or, worse, a model trained on nonsense without a word
    (``lr=-1``, ``epochs=0``, ``dropout=nan``)."""

    kind: type = int
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    below: float | None = None
    nullable: bool = False
    choices: tuple = ()
    empty: bool = True
    example: object = None

    def check(self, value, key: str):
        """``value`` as the model reads it (a whole float such as ``1e3`` as an int), or a
        :class:`ConfigError` naming ``key`` and the valid range."""
        if self.kind is str:
            if value not in self.choices:
                raise ConfigError(
                    f"{key}={value!r} is not one of {', '.join(self.choices)}", f"give e.g. {key}={self.choices[0]}"
                )
            return value
        if self.kind is list:
            example = f"{key}=[{','.join(map(str, self.example))}]"
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                raise ConfigError(f"{key}={value!r} is not a list of layer widths", f"give a list, e.g. {example}")
            if not value and not self.empty:
                raise ConfigError(f"{key}=[] holds no layer", f"give at least one width, e.g. {example}")
            widths = []
            for width in value:
                try:
                    widths.append(checked_setting(width, key, int, minimum=1))
                except ConfigError:
                    raise ConfigError(
                        f"{key}={list(value)}: the width {width!r} is not a whole number >= 1",
                        f"give widths of at least 1, e.g. {example}",
                    ) from None
            return widths
        if value is None and self.nullable:
            return None
        # not checked_setting's nullable: its hint calls null "the default", which a model's null is not
        # (max_depth: null is no limit)
        return checked_setting(
            value,
            key,
            self.kind,
            minimum=self.minimum,
            above=self.above,
            maximum=self.maximum,
            below=self.below,
            example=self.example,
        )


def register_model(cls):
    MODELS[cls.name] = cls
    return cls


def model_names() -> list[str]:
    _load_all()
    return sorted(MODELS)


def _load_all() -> None:
    from . import torch_models, tree_models  # noqa: F401  (registration side effects)


def make_model(
    name: str, n_classes: int, n_features: int, seed: int = 0, *, where: str = "model_params", **params
) -> LifetimeModel:
    """Instantiate a registered model; unknown names and parameters are errors that list options,
    and every parameter's value is checked (:attr:`LifetimeModel.rules`). ``where`` is the config
    key the parameters came from, which the messages name (``model.params`` for the train command;
    the default ``model_params`` is the learned policies' key for them)."""
    _load_all()
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))} (model=NAME)")
    cls = MODELS[name]
    unknown = set(params) - set(cls.defaults)
    if unknown:
        raise ValueError(f"model {name}: unknown parameter(s) {sorted(unknown)}; accepted: {sorted(cls.defaults)}")
    checked = cls.checked_params({**cls.defaults, **params}, where)
    model = cls(n_classes=n_classes, n_features=n_features, seed=seed, **checked)
    model.where = where
    return model


class InputScaler:
    """log2(1 + x) on non-negative heavy-tailed columns, then standardisation (fit on train)."""

    def __init__(self, log_columns: list[int] | None = None):
        self.log_columns = log_columns
        self.mean = None
        self.std = None

    def _log(self, X: np.ndarray) -> np.ndarray:
        X = np.array(X, np.float64)
        cols = list(range(X.shape[-1])) if self.log_columns is None else list(self.log_columns)
        if cols:
            v = X[..., cols]
            X[..., cols] = np.sign(v) * np.log2(1.0 + np.abs(v))
        return X

    def fit(self, X: np.ndarray) -> InputScaler:
        Z = self._log(X).reshape(-1, X.shape[-1])
        self.mean = Z.mean(axis=0)
        self.std = Z.std(axis=0)
        self.std[self.std == 0] = 1.0
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        Z = self._log(X)  # a float64 copy: standardised in place (half the time, same bits)
        Z -= self.mean
        Z /= self.std
        return Z.astype(np.float32)

    def to_dict(self) -> dict:
        return {
            "log_columns": None if self.log_columns is None else list(self.log_columns),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
        }


class LifetimeModel:
    """Base class. Subclasses set ``name``, ``defaults`` and implement ``_fit``/``_proba``."""

    name = "base"
    defaults: dict = {}
    #: how each parameter of ``defaults`` is checked (:class:`Param`), by name
    rules: dict = {}
    sequence = False  # True: inputs are [n, history, features]
    #: the config key of the parameters, for messages (:func:`make_model` sets it)
    where = "model_params"

    @classmethod
    def checked_params(cls, params: dict, where: str = "model_params") -> dict:
        """``params`` with each value checked by its rule (:attr:`rules`): a
        :class:`~dogi_ml.errors.ConfigError` naming ``where.KEY`` and the valid range for the
        first bad one."""
        return {k: cls.rules[k].check(v, f"{where}.{k}") if k in cls.rules else v for k, v in params.items()}

    def __init__(self, n_classes: int, n_features: int, seed: int = 0, **params):
        self.n_classes = int(n_classes)
        self.n_features = int(n_features)
        self.seed = int(seed)
        self.params = params
        self.scaler = InputScaler()
        self.history: list[dict] = []

    def fit(self, X, y, X_val=None, y_val=None) -> LifetimeModel:
        self._check(X)
        self.scaler.fit(X)
        Xv = None if X_val is None else self.scaler.transform(X_val)
        self._fit(
            self.scaler.transform(X),
            np.asarray(y, np.int64),
            Xv,
            None if y_val is None else np.asarray(y_val, np.int64),
        )
        return self

    def predict_proba(self, X) -> np.ndarray:
        self._check(X)
        return self._proba(self.scaler.transform(X))

    def predict(self, X) -> np.ndarray:
        return self.predict_proba(X).argmax(axis=1)

    def _check(self, X) -> None:
        X = np.asarray(X)
        want = 3 if self.sequence else 2
        if X.ndim != want or X.shape[-1] != self.n_features:
            raise ValueError(
                f"model {self.name}: expected {'[n, history, ' if self.sequence else '[n, '}"
                f"{self.n_features}] features, got shape {X.shape}"
            )

    def n_parameters(self) -> int:
        return 0

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            pickle.dump(self, fh)
        path.with_suffix(".json").write_text(
            json.dumps(
                {
                    "model": self.name,
                    "n_classes": self.n_classes,
                    "n_features": self.n_features,
                    "params": self.params,
                    "scaler": self.scaler.to_dict(),
                },
                indent=2,
                default=str,
            )
        )
        return path

    @staticmethod
    def load(path: str | Path) -> LifetimeModel:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"model file not found: {path}")
        with open(path, "rb") as fh:
            model = pickle.load(fh)
        if not isinstance(model, LifetimeModel):
            raise ValueError(f"{path} does not hold a dogi_ml lifetime model")
        return model

    def _fit(self, X, y, X_val, y_val):  # pragma: no cover - abstract
        raise NotImplementedError

    def _proba(self, X):  # pragma: no cover - abstract
        raise NotImplementedError
