"""Kueue's own TAS test tables (the data beside these runners), through the engine and through plan."""
