from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, ToolResult, tool
from tooldeck.errors import ErrorCode
from tooldeck.run.capabilities import Capability


@tool(side_effects=True)
def book(day: str) -> str:
    """Book a table on a day of the week."""
    return f"booked for {day}"


class NoWeekendBookings(Capability):
    def tools(self):  # a tool the model may call
        return [tool(lambda: "Monday to Friday", name="opening_days", description="Open days.")]

    def instructions(self, ctx):  # added to the system prompt
        return "We take no bookings on Saturday or Sunday."

    async def wrap_call(self, call, ctx, call_next):  # a guardrail around every call
        if call.name == "book" and call.arguments["day"] in ("Saturday", "Sunday"):
            return ToolResult.failure(ErrorCode.REFUSED, "no bookings on weekends")
        return await call_next(call)


weekend = ToolCall(id="1", name="book", arguments={"day": "Sunday"})
model = ScriptedModel([AssistantOutput(tool_calls=(weekend,)), AssistantOutput(content="Closed.")])
agent = Agent(model, [book], capabilities=[NoWeekendBookings()])
result = agent.run_sync("Book a table for Sunday")
assert result.tool_trace[0].result.output == "error[refused]: no bookings on weekends"
assert "no bookings on Saturday or Sunday" in model.requests[0].instructions
