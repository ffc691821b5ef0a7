"""A worker process for the claims test: asks the same chat requests as its siblings, at the
same moment, through a Gateway on a shared PostgreSQL store, and prints its gateway stats.

    python -m tests.support.claim_worker PG_URL BASE_URL N_REQUESTS START_AT SEED
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import create_engine

from ragrouter.config import Config
from ragrouter.llm.gateway import Gateway


def main() -> None:
    pg_url, base_url, n, start_at, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    os.environ.setdefault("RAGROUTER_CLAIM_KEY", "k")
    spec = {"kind": "openai", "base_url": base_url, "model": "claim-model", "api_key_env": "RAGROUTER_CLAIM_KEY",
            "concurrency": 8, "timeout_s": 30, "retries": 2}
    cfg = Config({"backends": {"b": spec}, "roles": {"generators": ["b"], "extractor": "b", "judge": "b",
                                                     "query_generator": "b", "embedder": "b"}}, source="claims")
    engine = create_engine(pg_url, pool_size=12)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    with Gateway(cfg, engine) as gw:
        gw.backend("b")
        time.sleep(max(0.0, start_at - time.time()))
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(
                lambda i: gw.chat("b", [{"role": "user", "content": f"shared request {i}"}], temperature=0.0,
                                  max_tokens=10, stage="answer", phase="retrieval"), order))
        stats = gw.stats()
    engine.dispose()
    print(json.dumps({"http_requests": stats["http_requests"], "cache_hits": stats["cache_hits"],
                      "claim_hits": stats.get("claim_hits", 0), "texts": sorted({r.text for r in results})}))


if __name__ == "__main__":
    main()
