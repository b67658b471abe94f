"""``GET /metrics``: what ``create_app``'s ``metrics`` gives, in Prometheus's text format, to
operators and metrics tokens (403 for anyone else). Included only when there is ``metrics``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from rota.api.auth import principal
from rota.api.errors import Forbidden
from rota.api.state import Api, api_of
from rota.store import Principal, Role

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"

router = APIRouter()


@router.get("/metrics")
def prometheus(who: Principal = Depends(principal), api: Api = Depends(api_of)) -> Response:
    if not (who.operator or who.role is Role.METRICS):
        raise Forbidden("only an operator or a metrics token may read the metrics "
                        "(an operator makes one: rota token create NAME --metrics)")
    assert api.metrics is not None  # the router is included only with metrics
    return Response(api.metrics(), media_type=PROMETHEUS_TEXT)
