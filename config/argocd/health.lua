-- Argo CD health check of nodemaint.dev/NodeMaintenance.
--
-- The status of a NodeMaintenance follows kstatus: status.observedGeneration, and a Ready
-- condition that is True once the maintenance reached what its spec asks, else False with the
-- reason and message of what it waits for. The controller computes Ready from the other
-- conditions (readyCondition in internal/controller/nodemaintenance/nodemaintenancedecide/status.go; the conditions and
-- their reasons are in api/v1alpha1/nodemaintenance_types.go).
--
-- Healthy: Ready is True. Suspended: a rollout waits for its maintenance window to open.
-- Degraded: something needs an admin: the drain outlived drainTimeout, the spec or the
-- nodeSelector cannot be used, or the rollout halted for another reason. Progressing otherwise:
-- the controller has not yet observed the spec, or the maintenance is under way.
--
-- Kept identical to the data key of config/argocd/argocd-cm-patch.yaml (test/gitops checks it).
-- It uses no standard library but the base one (ipairs), which Argo CD loads for every script.

local hs = {}

local function condition(conditionType)
  if obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

-- decide returns the health status, and the deciding condition's reason and message.
local function decide(status, c)
  hs.status = status
  hs.message = c.reason or c.type
  if c.message ~= nil and c.message ~= "" then
    hs.message = hs.message .. ": " .. c.message
  end
  return hs
end

if obj.status == nil or obj.status.observedGeneration == nil or
    (obj.metadata.generation ~= nil and obj.status.observedGeneration < obj.metadata.generation) then
  hs.status = "Progressing"
  hs.message = "waiting for the controller"
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  return decide("Healthy", ready)
end

-- What needs an admin comes first: a window that cannot be parsed (SpecValid False) also halts
-- the rollout OutsideWindow, and it never opens.
local specValid = condition("SpecValid")
if specValid ~= nil and specValid.status == "False" then
  return decide("Degraded", specValid)
end
local nodesSelected = condition("NodesSelected")
if nodesSelected ~= nil and nodesSelected.status == "False" and (nodesSelected.reason == "InvalidNodeSelector" or nodesSelected.reason == "EtcdQuorumAtRisk") then
  return decide("Degraded", nodesSelected)
end
local drainTimedOut = condition("DrainTimedOut")
if drainTimedOut ~= nil and drainTimedOut.status == "True" then
  return decide("Degraded", drainTimedOut)
end
local halted = condition("RolloutHalted")
if halted ~= nil and halted.status == "True" then
  if halted.reason == "OutsideWindow" then
    return decide("Suspended", halted)
  end
  return decide("Degraded", halted)
end

if ready ~= nil then
  return decide("Progressing", ready)
end
hs.status = "Progressing"
hs.message = "waiting for the controller to report Ready"
return hs
