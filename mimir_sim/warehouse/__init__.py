"""The MemTransfer warehouse: a grid world with racks and items, its tasks and cases, rendered
with MuJoCo (see README, "MemTransfer")."""
