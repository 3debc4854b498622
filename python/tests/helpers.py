"""What several test files share (imported as `helpers`: pytest puts this
folder on sys.path)."""
import duro


def kinds(client, instance_id):
    """The kinds of the current execution's events ([] before it began: a
    started instance has no execution until its first turn)."""
    try:
        return [e.kind for e in client.history(instance_id)]
    except duro.NotFound:
        return []
