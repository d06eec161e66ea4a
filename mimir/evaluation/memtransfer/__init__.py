"""``mimir bench memtransfer``: the MemTransfer protocol on the warehouse of
``mimir_sim.warehouse`` (conditions, policies, runner, metrics, report)."""
