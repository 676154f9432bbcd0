"""ReinDescribeAgent: what a worker knows about an agent (its tools, config), for clients.

A fork into another agent checks that agent's tools before it starts anything; only a worker
knows them. One local activity, no other commands.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core.contract import DESCRIBE_WORKFLOW_TYPE, AgentDescription, DescribeInput

from rein.workflows.options import describe_agent


@workflow.defn(name=DESCRIBE_WORKFLOW_TYPE)
class DescribeAgentWorkflow:
    @workflow.run
    async def run(self, request: DescribeInput) -> AgentDescription:
        return await describe_agent(request.agent, f"describe agent {request.agent}")
