"""Tree and linear lifetime models: LightGBM, random forest, logistic regression."""

from __future__ import annotations

import numpy as np

from .base import LifetimeModel, register_model


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

    def _fit(self, X, y, X_val, y_val):
        from sklearn.ensemble import RandomForestClassifier

        p = self.params
        self.est = RandomForestClassifier(
            n_estimators=p["n_estimators"],
            max_depth=p["max_depth"],
            min_samples_leaf=p["min_samples_leaf"],
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

    def _fit(self, X, y, X_val, y_val):
        from sklearn.linear_model import LogisticRegression

        self.est = LogisticRegression(C=self.params["C"], max_iter=self.params["max_iter"])
        self.est.fit(X, y)

    def n_parameters(self) -> int:
        return int(self.est.coef_.size + self.est.intercept_.size) if hasattr(self, "est") else 0
