"""Hostile input, table by table: each row a one-line error naming the object, never a traceback or hang."""
