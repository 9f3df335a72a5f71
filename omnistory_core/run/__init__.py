"""Running systems from a Hydra config (the Hydra entry point itself is :mod:`omnistory_core.app`).

* :mod:`~omnistory_core.run.generate`: one system over the dataset -> its job directory;
* :mod:`~omnistory_core.run.manifest`: what a job records in ``manifest.json``;
* :mod:`~omnistory_core.run.sweep`: the sweep callback (dataset check before the jobs, stats,
  evaluation and report after them).

The dataset a run loads once per process is :mod:`omnistory_core.data.cache`; the progress bars
are :mod:`omnistory_core.engine.progress`.
"""
