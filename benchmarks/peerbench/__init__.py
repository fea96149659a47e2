"""The side-by-side benchmark of quasar against RabbitMQ, Redis streams and NATS
JetStream (``benchmarks/peers.py``): workloads, server adapters, load generator and
report, one concept to a module."""
