"""Placement quality: a discrete-event simulator driving the product's placement."""
