"""dogi_ml's Hydra configs (YAML only); a package so the configs ship inside wheels."""
