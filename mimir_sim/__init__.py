"""MuJoCo simulation of the TidyBot++ in a kitchen."""
