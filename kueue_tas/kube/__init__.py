"""Generic Kubernetes machinery: errors, the request path, events, the resource catalogue,
decoding, the reflector (LIST + WATCH), informers and their stores, slim stored forms.

Nothing here knows about admission, ungating or the capacity model. Keep this package free of
imports at package level: ``kueue_tas.kube.errors`` is used by stdlib-only callers.
"""
