"""dogi_ml: data placement for log-structured storage."""
__version__ = "0.1.0"
