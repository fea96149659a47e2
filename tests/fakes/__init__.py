"""Fakes shared by the test directories: an in-process broker (:mod:`.broker`) with
its transaction coordinator (:mod:`.coordinator`), and a runner that puts the broker
on its own event-loop thread for blocking clients (:mod:`.threaded`)."""
