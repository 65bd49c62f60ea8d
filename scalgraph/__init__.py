"""scalgraph: which source lines make an MPI program stop scaling, and why."""
__version__ = "0.1.0"
