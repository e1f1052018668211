"""The events a profiler records and the summaries made of them, as ``torch.autograd.profiler_util``.

A ``FunctionEvent`` is one timed region: an op (one ``Function.apply``) or a
``record_function`` block, with its start and end on the host clock (microseconds), its
thread, the events nested in it (``cpu_children``) and the one it is nested in
(``cpu_parent``). Its *self* time is its time minus its children's: what it spent itself.

An ``EventList`` holds events; ``key_averages()`` groups them by name (and input shapes, if
asked) into ``FunctionEventAvg`` rows that sum the times and count the calls; ``table()``
prints those rows in PyTorch's layout (Name, Self CPU %, Self CPU, CPU total %, CPU total,
CPU time avg, # of Calls, and Input Shapes when shapes were recorded); ``export_chrome_trace``
writes the events as a Chrome trace (JSON, complete events "X"; open it in chrome://tracing
or Perfetto). minidl times on the host only: device times are zero and get no columns.
"""
import json
import os

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval"]


class Interval:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class _Times:
    """What events and their averages both answer: times, averages and their printed forms."""
    count = 1
    cpu_time_total = self_cpu_time_total = 0.0
    device_time_total = self_device_time_total = 0.0
    is_async = False
    is_legacy = False
    node_id = -1
    overload_name = ""
    stack = ()

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    @property
    def self_cpu_time(self):
        return 0.0 if self.count == 0 else self.self_cpu_time_total / self.count

    # PyTorch's older names for the device columns
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))


class FunctionEvent(_Times):
    """One timed region; times in microseconds."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, is_user_annotation=False):  # noqa: A002
        self.id, self.name, self.thread = id, name, thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.is_user_annotation = is_user_annotation
        self.cpu_children = []
        self.cpu_parent = None
        self.children_time = 0.0      # the time of the children, filled as they close
        self.trace_name = name        # the name in the chrome trace (a profiler step's carries its number)

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - self.children_time

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={self.cpu_time_str} "
                f"start_us={self.time_range.start:.3f} end_us={self.time_range.end:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} thread={self.thread} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg(_Times):
    """The events of one key together: times summed, calls counted."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.input_shapes = None
        self.is_user_annotation = False
        self.cpu_parent = None

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.input_shapes = other.input_shapes
            self.is_user_annotation = other.is_user_annotation
            self.cpu_parent = other.cpu_parent
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        return self

    __iadd__ = add

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_total_str} count={self.count} input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of events (or of their averages) with PyTorch's summaries."""

    def __init__(self, *args, **kwargs):
        kwargs.pop("use_device", None)
        kwargs.pop("profile_memory", None)
        kwargs.pop("with_flops", None)
        super().__init__(*args, **kwargs)

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """One FunctionEventAvg per name (per name and input shapes with ``group_by_input_shape``),
        in the order the names first appear. ``group_by_stack_n`` needs recorded stacks, which
        minidl does not record: any value groups as 0 does."""
        rows = {}
        for e in self:
            key = (e.key, str(e.input_shapes)) if group_by_input_shape else e.key
            rows.setdefault(key, FunctionEventAvg()).add(e)
        return EventList(rows.values())

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        """The events as PyTorch's table: rows sorted by the attribute ``sort_by`` (descending;
        "cpu_time_total", "self_cpu_time_total", "cpu_time", "count", ...), at most ``row_limit``
        of them; percentages are of the sum of all rows' self times."""
        return _build_table(self, sort_by, header, row_limit, max_name_column_width, max_shapes_column_width,
                            top_level_events_only, time_unit)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        """Write the events to ``path`` as a Chrome trace (JSON object with "traceEvents")."""
        pid = os.getpid()
        trace = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}]
        for e in self:
            if not isinstance(e, FunctionEvent):
                raise TypeError("export_chrome_trace needs the recorded events, not their averages "
                                f"(got {type(e).__name__})")
            entry = {"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op", "name": e.trace_name,
                     "pid": pid, "tid": e.thread, "ts": e.time_range.start, "dur": e.time_range.elapsed_us(),
                     "args": {"External id": e.id}}
            if e.input_shapes:
                entry["args"]["Input Dims"] = e.input_shapes
            trace.append(entry)
        with open(path, "w") as f:
            json.dump({"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace}, f)


def _format_time(time_us):
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_share(time_us, total_time_us):
    if total_time_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_time_us:.2f}%"


def _in_unit(time_us, time_unit):
    if time_unit == "s":
        return f"{time_us / 1e6:.3f}s"
    if time_unit == "ms":
        return f"{time_us / 1e3:.3f}ms"
    if time_unit == "us":
        return f"{time_us:.3f}us"
    return _format_time(time_us)


def _build_table(events, sort_by, header, row_limit, max_name_column_width, max_shapes_column_width,
                 top_level_events_only, time_unit):
    if len(events) == 0:
        return ""
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)
    has_shapes = any(e.input_shapes for e in events)
    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    widths = [name_width] + [12] * (len(headers) - 1)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
    row_format = "".join("{: >" + str(w) + "}  " for w in widths)
    header_sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2
    total = sum(e.self_cpu_time_total for e in events)

    lines = []
    if header is not None:
        lines += ["=" * line_length, header]
    if top_level_events_only:
        lines += ["=" * line_length, "This report only display top-level ops statistics"]
    lines += [header_sep, row_format.format(*headers), header_sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(e.self_cpu_time_total, total), _in_unit(e.self_cpu_time_total, time_unit),
               _format_time_share(e.cpu_time_total, total), _in_unit(e.cpu_time_total, time_unit),
               _in_unit(e.cpu_time, time_unit), e.count]
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        lines.append(row_format.format(*row))
    lines += [header_sep, f"Self CPU time total: {_in_unit(total, time_unit)}"]
    return "\n".join(lines) + "\n"
