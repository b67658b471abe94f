"""The serving runtime's Prometheus metrics (``rota.control.serving``), read when scraped.

Per service (a bounded label: services are few, made by people): its replicas wanted, running
(live) and ready; requests in flight and waiting for a replica; and, counted since the control
plane started, the requests it took and its cold starts (a request that found no replica at
all). docs/metrics.md lists them with the others.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rota.control.serving import Serving


class ServingMetrics:
    """A collector for ``Metrics.registry``."""

    def __init__(self, serving: Serving) -> None:
        self.serving = serving

    def describe(self) -> list[Metric]:
        return []  # described by what collect yields, at each scrape

    def collect(self) -> Iterator[Metric]:
        views = self.serving.views()
        replicas = GaugeMetricFamily("rota_service_replicas", "Replicas of a service: wanted "
                                     "now, not ended (live), and ready to serve",
                                     labels=["service", "state"])
        in_flight = GaugeMetricFamily("rota_service_requests_in_flight",
                                      "Requests a service's replicas are answering",
                                      labels=["service"])
        queued = GaugeMetricFamily("rota_service_requests_queued",
                                   "Requests held while no replica of the service is ready",
                                   labels=["service"])
        requests = CounterMetricFamily("rota_service_requests", "Requests for a service's "
                                       "models through the gateway", labels=["service"])
        cold = CounterMetricFamily("rota_service_cold_starts", "Requests that found no "
                                   "replica of their service and started one",
                                   labels=["service"])
        for name, view in sorted(views.items()):
            r = view["replicas"]
            for state in ("desired", "live", "ready"):
                replicas.add_metric([name, state], r[state])
            in_flight.add_metric([name], view["in_flight"])
            queued.add_metric([name], view["queued"])
            requests.add_metric([name], view["requests"])
            cold.add_metric([name], view["cold_starts"])
        yield from (replicas, in_flight, queued, requests, cold)
