"""The names the ``mimir bench memtransfer`` command line offers (standard library only, so the
command line starts fast)."""

CONDITIONS = ("original", "new-start", "blocked", "mixed")
MIXES = ("irrelevant", "confusable")
POLICIES = ("oracle", "no_memory")
REPRESENTATIONS = ("working", "full_context", "summary", "semantic", "hybrid", "episodic",
                   "mimir")
DOCUMENT_KINDS = {"summary": ("summary",), "semantic": ("semantic",),
                  "hybrid": ("summary", "semantic")}
