"""Tree and linear lifetime models: LightGBM, random forest, logistic regression."""

from __future__ import annotations

import numpy as np

from .base import LifetimeModel, Param, register_model

#: LightGBM keeps its counts in C ints: a larger value failed inside LightGBM, naming no setting
C_INT = 2**31 - 1
#: The most trees a model builds. A forest fits and keeps every tree (and boosting without early
#: stopping, when the validation rows hold one class, runs every round): n_estimators=1e12 ran
#: for hours, its memory growing, until stopped. Far past the point where more trees help.
MAX_TREES = 100_000
THREADS = Param(int, minimum=1, example=1)


class _SklearnLike(LifetimeModel):
    def _full_proba(self, proba: np.ndarray) -> np.ndarray:
        # classes absent from the training split get probability 0
        out = np.zeros((proba.shape[0], self.n_classes), np.float64)
        out[:, self.est.classes_] = proba
        return out

    def _proba(self, X):
        return self._full_proba(self.est.predict_proba(X))


@register_model
class LightGBM(_SklearnLike):
    name = "lightgbm"
    defaults = {"n_estimators": 200, "num_leaves": 31, "learning_rate": 0.1, "early_stopping": 20, "threads": 1}
    rules = {
        "n_estimators": Param(int, minimum=1, maximum=MAX_TREES, example=200),
        "num_leaves": Param(int, minimum=2, maximum=131072, example=31),  # LightGBM's own bounds
        "learning_rate": Param(float, above=0, example=0.1),
        # rounds without a better validation score before boosting stops (0 and -1 turned it off unsaid)
        "early_stopping": Param(int, minimum=1, maximum=C_INT, example=20),
        "threads": THREADS,
    }

    def _fit(self, X, y, X_val, y_val):
        import lightgbm as lgb

        p = self.params
        self.est = lgb.LGBMClassifier(
            n_estimators=p["n_estimators"],
            num_leaves=p["num_leaves"],
            learning_rate=p["learning_rate"],
            random_state=self.seed,
            n_jobs=p["threads"],
            deterministic=True,
            force_row_wise=True,
            verbose=-1,
        )
        kw = {}
        if X_val is not None and len(X_val) and len(np.unique(y_val)) > 1:
            kw = {
                "eval_X": X_val,
                "eval_y": y_val,
                "callbacks": [lgb.early_stopping(p["early_stopping"], verbose=False)],
            }
        self.est.fit(X, y, **kw)

    def n_parameters(self) -> int:
        """Split thresholds plus leaf values over all trees."""
        if not hasattr(self, "est"):
            return 0
        trees = self.est.booster_.dump_model()["tree_info"]
        return int(sum(2 * t["num_leaves"] - 1 for t in trees))


@register_model
class RandomForest(_SklearnLike):
    name = "random_forest"
    defaults = {"n_estimators": 50, "max_depth": 12, "min_samples_leaf": 5, "threads": 1}
    rules = {
        "n_estimators": Param(int, minimum=1, maximum=MAX_TREES, example=50),
        "max_depth": Param(int, minimum=1, nullable=True, example=12),  # null: grown until the leaves are pure
        # rows per leaf, or (below 1) a share of the training rows, as scikit-learn reads it; a
        # value such as 1.5 passes here and is refused by scikit-learn (train names the key)
        "min_samples_leaf": Param(float, above=0, example=5),
        "threads": THREADS,
    }

    def _fit(self, X, y, X_val, y_val):
        from sklearn.ensemble import RandomForestClassifier

        p = self.params
        leaf = p["min_samples_leaf"]
        self.est = RandomForestClassifier(
            n_estimators=p["n_estimators"],
            max_depth=p["max_depth"],
            # scikit-learn reads a float as a share of the rows: 5.0 must stay five rows
            min_samples_leaf=int(leaf) if float(leaf).is_integer() else leaf,
            random_state=self.seed,
            n_jobs=p["threads"],
        )
        self.est.fit(X, y)

    def n_parameters(self) -> int:
        """Nodes over all trees (a split threshold or a leaf distribution each)."""
        return int(sum(e.tree_.node_count for e in self.est.estimators_)) if hasattr(self, "est") else 0


@register_model
class Logistic(_SklearnLike):
    name = "logistic"
    defaults = {"C": 1.0, "max_iter": 300}
    rules = {
        "C": Param(float, above=0, example=1.0),
        "max_iter": Param(int, minimum=1, example=300),  # 0 left the model unfitted without a word
    }

    def _fit(self, X, y, X_val, y_val):
        from sklearn.linear_model import LogisticRegression

        self.est = LogisticRegression(C=self.params["C"], max_iter=self.params["max_iter"])
        self.est.fit(X, y)

    def n_parameters(self) -> int:
        return int(self.est.coef_.size + self.est.intercept_.size) if hasattr(self, "est") else 0
