"""``mimir eval``: methods of one system compared over generated layouts, with a report.

- :mod:`~mimir.evaluation.methods`: the methods (switch settings) and trial settings of
  ``config/eval.yaml``;
- :mod:`~mimir.evaluation.trials`: one trial (a method on one layout) as a ``mimir sim`` run in
  its own folder, and what a finished trial left there;
- :mod:`~mimir.evaluation.runner`: trials in parallel, each graph in its own ROS domain,
  resumable;
- :mod:`~mimir.evaluation.stats`: bootstrap intervals, paired tests, Holm's correction;
- :mod:`~mimir.evaluation.report`: the Markdown report, plots, per-trial lines and failures.
"""
