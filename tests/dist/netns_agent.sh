#!/bin/sh
# The "ssh" of test_two_nodes.sh's nodes (network namespaces on one machine), for Open MPI's rsh
# launcher (--mca plm_rsh_agent): called as ssh would be, AGENT HOST COMMAND..., it runs COMMAND
# (words joined by spaces and read by a shell, as ssh does) in HOST's network namespace under the
# node's own host name (a UTS namespace of its own), as if logged in on that node.
# TXL_NETNS_NODES names the nodes: "ADDRESS=NAMESPACE=HOSTNAME ..." (one entry a node).
host=$1
shift
for node in $TXL_NETNS_NODES; do
  addr=${node%%=*}
  rest=${node#*=}
  if [ "$addr" = "$host" ]; then
    exec ip netns exec "${rest%%=*}" unshare --uts sh -c 'hostname "$0" && eval "$*"' "${rest#*=}" "$@"
  fi
done
echo "netns_agent.sh: $host is none of the nodes in TXL_NETNS_NODES ($TXL_NETNS_NODES)" >&2
exit 255
