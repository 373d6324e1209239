"""`python -m tests.campaign_job run CONFIG ...`: the `evo` command line with fake mutators and a fake
deterministic latency (see `tests.islands_fakes`), for campaign tests that run it as a process or as
a Ray job. Everything else (Ray, islands, broker, evaluator workers, run directory) is the real thing."""

from __future__ import annotations

import sys

from evo.app.cli import main
from evo.app.run.setup import CampaignHooks

from .islands_fakes import fake_evaluator_factory, fake_mutator_factory

FAKE_HOOKS = CampaignHooks(mutator_factory=fake_mutator_factory, evaluator_factory=fake_evaluator_factory)

if __name__ == "__main__":
    sys.exit(main(hooks=FAKE_HOOKS))
