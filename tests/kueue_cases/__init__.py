"""Kueue's own TAS placement test cases, transcribed as plain data.

Source: kubernetes-sigs/kueue, ``pkg/cache/scheduler/tas_cache_test.go``,
``TestFindTopologyAssignments`` (the table of FindTopologyAssignmentsForFlavor
cases), stored version at commit ``009736297a53a19dee0a1e9186fdbbc3948504e9``.
Only inputs and expected outputs are transcribed; each case keeps Kueue's name.
"""
