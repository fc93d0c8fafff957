"""Local end-to-end harness: a real Kubernetes control plane, kwok, Kueue and JobSet on 127.0.0.1."""
