"""A training's steps, as the runners that window a run by steps count them (torch.profiler's
schedule, memray's window). Prepended after `sp_launch.py`. `watch_steps(on_step)` calls
`on_step(kind)` at the end of each step.

A step is an optimizer step; a loop without an optimizer (manual SGD) steps at each backward,
and one without backward (inference) at each outermost module forward. A weaker kind steps
only from its second sighting with no stronger one seen: the first iteration's forward and
backward come before its optimizer step, and stepping at them would spend a window's first
steps inside one iteration (two whole steps traced of three active)."""


def watch_steps(on_step):
    import torch
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook
    strength = {"forward": 0, "backward": 1, "optimizer": 2}
    counts = {"forward": 0, "backward": 0, "optimizer": 0}

    def stepped(kind):
        counts[kind] += 1
        if any(n and strength[k] > strength[kind] for k, n in counts.items()):
            return
        if kind != "optimizer" and counts[kind] < 2:
            return
        on_step(kind)

    register_optimizer_step_post_hook(lambda optimizer, args, kw: stepped("optimizer"))
    backward = torch.autograd.backward

    def backward_then_step(*args, **kw):
        result = backward(*args, **kw)
        stepped("backward")
        return result

    torch.autograd.backward = backward_then_step
    depth = [0]

    def entered(module, args):
        depth[0] += 1

    def left(module, args, result):
        depth[0] -= 1
        if depth[0] == 0:
            stepped("forward")

    register_module_forward_pre_hook(entered)
    register_module_forward_hook(left)
