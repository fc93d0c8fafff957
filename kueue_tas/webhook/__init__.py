"""The admission webhooks every replica serves, leader or standby: ``/validate`` (a Job's,
JobSet's or Workload's topology request checked at creation) and ``/mutate-pod`` (our
scheduling gate on pods of gated PodSets).

``server`` (the HTTPS server, its ports and metrics), ``intake`` (a request body read within
bounds before anything looks at it), ``connections`` (how many connections a port holds, and
for how long), ``review`` (one AdmissionReview in, its answer out; pure), ``pod_gate`` (what
the pod webhook does to a pod; pure), ``cert_keeper`` (the serving certificate and the CA the
apiserver trusts).

Entry points: ``server.WebhookServer``, ``review.judge``, ``review.answer``.
Never: write to the API on a request's path (answers only), or trust a body it has not bounded.
"""
