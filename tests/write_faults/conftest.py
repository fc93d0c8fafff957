"""The controllers' writes under every API fault, through the real client (tests/faults.py)."""
