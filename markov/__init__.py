"""Markov-chain / closed-form WAF models of log-structured storage and group-configuration search."""
