"""dbt projects on disk: the manifest behind a ``dbt:`` section, and the task-side wrapper.

Leoflow never imports dbt: it runs the ``dbt`` executable (which lives in its own
environment, since dbt and Leoflow pin incompatible protobuf versions) and reads its
JSON artifacts. ``project`` is what the DAG loader calls; ``task`` is what a dbt
task's command runs (stdlib only, like the agent), and ``wave`` its part for
``dbt.batch: wave`` (one dbt invocation for the ready models of a wave).

Never imports the scheduler, the API, the store, ``leoflow.dagfile`` or Kubernetes;
the loader receives ``project.expander`` from its caller. ``task`` imports no leoflow
package at all.
"""
