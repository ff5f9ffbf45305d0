#!/usr/bin/env bash
# A tiny stdio MCP server (JSON-RPC 2.0, one message per line) for examples/mcp/main.iter and
# its tests. Needs bash and jq. Tools:
#   greet {name}   -> "Hello, NAME! (GREETING_MODE) from HOSTNAME"
#   reverse {text} -> the text reversed
# It leaves a marker in its working directory when it starts, so a test can tell where it ran.
touch "mcp-started-on-$(cat /etc/hostname 2>/dev/null || hostname)"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | jq -c '.id // empty' 2>/dev/null)
  method=$(printf '%s' "$line" | jq -r '.method // empty' 2>/dev/null)
  reply() { jq -cn --argjson id "$id" --argjson result "$1" '{jsonrpc: "2.0", id: $id, result: $result}'; }
  case "$method" in
    initialize)
      reply '{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"tiny","version":"1"}}' ;;
    tools/list)
      reply '{"tools":[
        {"name":"greet","description":"Greets someone","inputSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},
        {"name":"reverse","description":"Reverses a text","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}' ;;
    tools/call)
      tool=$(printf '%s' "$line" | jq -r '.params.name')
      case "$tool" in
        greet)
          who=$(printf '%s' "$line" | jq -r '.params.arguments.name')
          text="Hello, $who! (${GREETING_MODE:-plain}) from $(cat /etc/hostname 2>/dev/null || hostname)" ;;
        reverse)
          text=$(printf '%s' "$line" | jq -r '.params.arguments.text' | rev) ;;
        *)
          jq -cn --argjson id "$id" --arg t "unknown tool $tool" \
            '{jsonrpc: "2.0", id: $id, result: {content: [{type: "text", text: $t}], isError: true}}'
          continue ;;
      esac
      reply "$(jq -cn --arg t "$text" '{content: [{type: "text", text: $t}]}')" ;;
    "") ;;
    *)
      if [ -n "$id" ]; then
        jq -cn --argjson id "$id" '{jsonrpc: "2.0", id: $id, error: {code: -32601, message: "method not found"}}'
      fi ;;
  esac
done
