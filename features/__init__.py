"""Online causal features of block writes, labels from the annotation, feature selection."""
