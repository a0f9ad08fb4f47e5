from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentItem(_message.Message):
    __slots__ = ("id", "session_token", "exchange", "start", "heartbeat", "log", "complete", "resolve_secret", "pod_exchange", "next_task")
    ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXCHANGE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_SECRET_FIELD_NUMBER: _ClassVar[int]
    POD_EXCHANGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_TASK_FIELD_NUMBER: _ClassVar[int]
    id: int
    session_token: str
    exchange: ExchangeRequest
    start: StartRequest
    heartbeat: HeartbeatRequest
    log: LogChunk
    complete: CompleteRequest
    resolve_secret: ResolveSecretRequest
    pod_exchange: PodExchangeRequest
    next_task: NextTaskRequest
    def __init__(self, id: _Optional[int] = ..., session_token: _Optional[str] = ..., exchange: _Optional[_Union[ExchangeRequest, _Mapping]] = ..., start: _Optional[_Union[StartRequest, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatRequest, _Mapping]] = ..., log: _Optional[_Union[LogChunk, _Mapping]] = ..., complete: _Optional[_Union[CompleteRequest, _Mapping]] = ..., resolve_secret: _Optional[_Union[ResolveSecretRequest, _Mapping]] = ..., pod_exchange: _Optional[_Union[PodExchangeRequest, _Mapping]] = ..., next_task: _Optional[_Union[NextTaskRequest, _Mapping]] = ...) -> None: ...

class AgentBatch(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AgentItem]
    def __init__(self, items: _Optional[_Iterable[_Union[AgentItem, _Mapping]]] = ...) -> None: ...

class ItemReply(_message.Message):
    __slots__ = ("id", "code", "details", "exchange", "start", "heartbeat", "log", "complete", "resolve_secret", "pod_exchange", "next_task")
    ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    EXCHANGE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_SECRET_FIELD_NUMBER: _ClassVar[int]
    POD_EXCHANGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_TASK_FIELD_NUMBER: _ClassVar[int]
    id: int
    code: int
    details: str
    exchange: ExchangeResponse
    start: StartResponse
    heartbeat: HeartbeatResponse
    log: LogsAck
    complete: CompleteResponse
    resolve_secret: ResolveSecretResponse
    pod_exchange: PodExchangeResponse
    next_task: NextTaskResponse
    def __init__(self, id: _Optional[int] = ..., code: _Optional[int] = ..., details: _Optional[str] = ..., exchange: _Optional[_Union[ExchangeResponse, _Mapping]] = ..., start: _Optional[_Union[StartResponse, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatResponse, _Mapping]] = ..., log: _Optional[_Union[LogsAck, _Mapping]] = ..., complete: _Optional[_Union[CompleteResponse, _Mapping]] = ..., resolve_secret: _Optional[_Union[ResolveSecretResponse, _Mapping]] = ..., pod_exchange: _Optional[_Union[PodExchangeResponse, _Mapping]] = ..., next_task: _Optional[_Union[NextTaskResponse, _Mapping]] = ...) -> None: ...

class ReplyBatch(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[ItemReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[ItemReply, _Mapping]]] = ...) -> None: ...

class ExchangeRequest(_message.Message):
    __slots__ = ("ticket", "start")
    TICKET_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    ticket: str
    start: StartRequest
    def __init__(self, ticket: _Optional[str] = ..., start: _Optional[_Union[StartRequest, _Mapping]] = ...) -> None: ...

class ExchangeResponse(_message.Message):
    __slots__ = ("session_token", "dag_id", "run_id", "task_id", "try_number", "heartbeat_interval_seconds", "start")
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DAG_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TRY_NUMBER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    session_token: str
    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    heartbeat_interval_seconds: float
    start: StartResponse
    def __init__(self, session_token: _Optional[str] = ..., dag_id: _Optional[str] = ..., run_id: _Optional[str] = ..., task_id: _Optional[str] = ..., try_number: _Optional[int] = ..., heartbeat_interval_seconds: _Optional[float] = ..., start: _Optional[_Union[StartResponse, _Mapping]] = ...) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ("pod_name", "pod_uid", "hostname", "pid", "pod_task")
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    POD_TASK_FIELD_NUMBER: _ClassVar[int]
    pod_name: str
    pod_uid: str
    hostname: str
    pid: int
    pod_task: int
    def __init__(self, pod_name: _Optional[str] = ..., pod_uid: _Optional[str] = ..., hostname: _Optional[str] = ..., pid: _Optional[int] = ..., pod_task: _Optional[int] = ...) -> None: ...

class StartResponse(_message.Message):
    __slots__ = ("argv", "env", "cwd", "timeout_seconds", "secret_names", "inputs", "output_limit_bytes")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SECRET_NAMES_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    argv: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    cwd: str
    timeout_seconds: float
    secret_names: _containers.RepeatedScalarFieldContainer[str]
    inputs: _containers.ScalarMap[str, str]
    output_limit_bytes: int
    def __init__(self, argv: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., secret_names: _Optional[_Iterable[str]] = ..., inputs: _Optional[_Mapping[str, str]] = ..., output_limit_bytes: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("cancel_requested", "reason", "session_token")
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    reason: str
    session_token: str
    def __init__(self, cancel_requested: _Optional[bool] = ..., reason: _Optional[str] = ..., session_token: _Optional[str] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("stream", "data", "offset")
    class Stream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STREAM_UNSPECIFIED: _ClassVar[LogChunk.Stream]
        STDOUT: _ClassVar[LogChunk.Stream]
        STDERR: _ClassVar[LogChunk.Stream]
    STREAM_UNSPECIFIED: LogChunk.Stream
    STDOUT: LogChunk.Stream
    STDERR: LogChunk.Stream
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    stream: LogChunk.Stream
    data: bytes
    offset: int
    def __init__(self, stream: _Optional[_Union[LogChunk.Stream, str]] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class LogsAck(_message.Message):
    __slots__ = ("bytes_received",)
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    bytes_received: int
    def __init__(self, bytes_received: _Optional[int] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("exit_code", "oom_killed", "timed_out", "signal", "message", "not_started", "output", "output_error")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NOT_STARTED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ERROR_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    oom_killed: bool
    timed_out: bool
    signal: int
    message: str
    not_started: bool
    output: str
    output_error: str
    def __init__(self, exit_code: _Optional[int] = ..., oom_killed: _Optional[bool] = ..., timed_out: _Optional[bool] = ..., signal: _Optional[int] = ..., message: _Optional[str] = ..., not_started: _Optional[bool] = ..., output: _Optional[str] = ..., output_error: _Optional[str] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ("duplicate",)
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    def __init__(self, duplicate: _Optional[bool] = ...) -> None: ...

class ResolveSecretRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResolveSecretResponse(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: str
    def __init__(self, value: _Optional[str] = ...) -> None: ...

class PodExchangeRequest(_message.Message):
    __slots__ = ("ticket",)
    TICKET_FIELD_NUMBER: _ClassVar[int]
    ticket: str
    def __init__(self, ticket: _Optional[str] = ...) -> None: ...

class PodExchangeResponse(_message.Message):
    __slots__ = ("pod_token", "dag_id", "shape", "idle_timeout_seconds", "max_tasks")
    POD_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DAG_ID_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    pod_token: str
    dag_id: str
    shape: str
    idle_timeout_seconds: float
    max_tasks: int
    def __init__(self, pod_token: _Optional[str] = ..., dag_id: _Optional[str] = ..., shape: _Optional[str] = ..., idle_timeout_seconds: _Optional[float] = ..., max_tasks: _Optional[int] = ...) -> None: ...

class NextTaskRequest(_message.Message):
    __slots__ = ("done", "wait_seconds")
    DONE_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    done: int
    wait_seconds: float
    def __init__(self, done: _Optional[int] = ..., wait_seconds: _Optional[float] = ...) -> None: ...

class NextTaskResponse(_message.Message):
    __slots__ = ("ticket", "retire", "reason", "pod_token")
    TICKET_FIELD_NUMBER: _ClassVar[int]
    RETIRE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    POD_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ticket: str
    retire: bool
    reason: str
    pod_token: str
    def __init__(self, ticket: _Optional[str] = ..., retire: _Optional[bool] = ..., reason: _Optional[str] = ..., pod_token: _Optional[str] = ...) -> None: ...
