"""ReinDescribeAgent: what a worker knows about an agent (its tools, config), for clients.

A fork into another agent checks that agent's tools before it starts anything; only a worker
knows them. One local activity, no other commands.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from rein.contract import DESCRIBE_AGENT, DESCRIBE_WORKFLOW_TYPE, AgentDescription, DescribeInput


@workflow.defn(name=DESCRIBE_WORKFLOW_TYPE)
class DescribeAgentWorkflow:
    @workflow.run
    async def run(self, request: DescribeInput) -> AgentDescription:
        return await workflow.execute_local_activity(
            DESCRIBE_AGENT,
            request,
            result_type=AgentDescription,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["UnknownAgent"]),
            summary=f"describe agent {request.agent}",
        )
