"""`cli.py ask`: a trained router picks the paradigm for your question and answers it."""

from __future__ import annotations

import click

from ragrouter.commands.common import Ctx, pass_ctx
from ragrouter.db import migrate


@click.command("ask")
@click.option("--corpus", required=True, help="Corpus to answer from (its indicators feed the router).")
@click.argument("question")
@click.option("--router", help="Router to use (default: this store's trained router with the best correct "
              "rate; ties broken by routing accuracy, macro-F1, then name).")
@click.option("--max-tokens-budget", type=int, help="Skip paradigms whose expected tokens on this corpus "
              "exceed N (expected = their mean over the corpus' recorded runs).")
@click.option("--type", "query_type", type=click.Choice(["factual", "reasoning", "summary"]),
              help="The question's type (default: guessed without a model call from its wording, else the "
                   "nearest type centroid of the store's and the shared corpora's labelled questions; the output "
                   "says it guessed and how often such a guess was right).")
@click.option("--run-id", "run_id", help="Use the router of this MLflow run (one trained on this store).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@pass_ctx
def ask_command(ctx: Ctx, corpus: str, question: str, router: str | None, max_tokens_budget: int | None,
                query_type: str | None, run_id: str | None, as_json: bool) -> None:
    """Route QUESTION to a paradigm, run it, and show the answer, the choice and its cost.

    The router needs the question's type. Without --type it is guessed (no model call), and
    the output says so with how often such a guess was right when measured: about two in
    three on an unseen corpus' questions, so pass --type when you know it.

    The run is recorded in the store (query origin 'ask', status 'asked', so it stays out of
    the benchmark tables).

    \b
    Example:
      python cli.py --config configs/demo.yaml ask --corpus medical-demo \\
        "What is the most common type of skin cancer?" --max-tokens-budget 2000
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import ask as ask_mod

    engine = ctx.engine()
    migrate.ensure_current(engine)
    a = ask_mod.ask(engine, ctx.config, corpus, question, router=router, budget=max_tokens_budget,
                    query_type=query_type, run_id=run_id)
    if as_json:
        click.echo(ask_mod.to_json(a))
        return
    probs = ", ".join(f"{k} {v:.2f}" for k, v in sorted(a.probabilities.items(), key=lambda kv: -kv[1]))
    click.echo(f"answer:    {a.answer}")
    click.echo(f"paradigm:  {a.paradigm}  (router {a.router} on {a.features} features, encoder {a.encoder}, "
               f"MLflow run {a.router_run_id})")
    click.echo(f"type:      {ask_mod.type_line(a)}")
    click.echo(f"why:       {a.why}")
    click.echo(f"router:    {probs}")
    click.echo(f"tokens:    {a.tokens['total']} (retrieval {a.tokens['retrieval_in']}+{a.tokens['retrieval_out']}, "
               f"generation {a.tokens['generation_in']}+{a.tokens['generation_out']}); run id {a.run_id}")
