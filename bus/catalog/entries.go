package catalog

import "time"

// Example values share these, so that the examples read as one run.
var (
	exampleTime = time.Date(2026, time.March, 2, 10, 15, 4, 0, time.UTC)
	exampleTemp = 0.2
	exampleTask = "Find the official release date of Python 3.13.0 and quote the source."
	exampleURL  = "https://www.python.org/downloads/release/python-3130/"
	exampleAns  = "Python 3.13.0 was released on 7 October 2024. Source: " + exampleURL + " (ev_0003: \"Release Date: Oct. 7, 2024\")."
	exampleCfg  = RunConfig{
		Task:     exampleTask,
		WorkDir:  "/home/alice/vera/work/py313",
		InputDir: "/home/alice/vera/input",
		Model: ModelConfig{
			BaseURL:   "http://127.0.0.1:1234/v1",
			Name:      "qwen3-coder-30b-a3b-instruct",
			APIKeyEnv: "VERA_MODEL_API_KEY",
		},
		MaxSteps: 80,
		Auditor:  AuditorConfig{Enabled: true, MaxRounds: 3},
		Sandbox:  SandboxConfig{Network: true, Lab: true},
	}
	exampleCfgEffective = RunConfig{
		Task:     exampleTask,
		WorkDir:  "/home/alice/vera/work/py313",
		InputDir: "/home/alice/vera/input",
		Model: ModelConfig{
			BaseURL:   "http://127.0.0.1:1234/v1",
			Name:      "qwen3-coder-30b-a3b-instruct",
			APIKeyEnv: "VERA_MODEL_API_KEY",
			TimeoutMS: 150000,
		},
		MaxSteps: 80,
		Auditor: AuditorConfig{
			Enabled: true,
			Model: &ModelConfig{
				BaseURL:   "http://127.0.0.1:1234/v1",
				Name:      "qwen3-coder-30b-a3b-instruct",
				APIKeyEnv: "VERA_MODEL_API_KEY",
				TimeoutMS: 150000,
			},
			MaxRounds: 3,
			StopScore: 3,
		},
		Sandbox:    SandboxConfig{Network: true, Lab: true, Image: "vera-sandbox:latest", ToolTimeoutMS: 900000},
		VerifyFast: VerifyFastConfig{Enabled: true, Profile: "kimi-full"},
		Policy:     PolicyConfig{NotesInterval: 3, StagnationLimit: 3, FailureEscalationLimit: 2, QueryFamilyLimit: 3},
	}
)

const (
	digestPrompt   = "sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
	digestMessages = "sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
	digestStdout   = "sha256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"
	exampleEventID = "01JNZ8Q6V3K4T5M2R8X9Y0ABCD"
	exampleCurl    = "curl -sL " + "https://www.python.org/downloads/release/python-3130/" + " | grep -i -m1 'release date'"
)

// Producer and consumer lists shared by several entries.
var (
	agentOnly      = []string{ComponentAgent}
	sandboxdOnly   = []string{ComponentSandboxd}
	deepOnly       = []string{ComponentDeepVerify}
	projectorOnly  = []string{ComponentProjector}
	runControllers = []string{ComponentCLI, ComponentDashboard}
)

func catalogEntries() []Entry {
	entries := []Entry{
		{
			Type:    TypeTaskSubmitted,
			Summary: "A user or tool asks VERA to research a task; the first event of a run.",
			Description: "Published by `vera run`, the dashboard's Start run button or any outside program on a new run id (the envelope's subject). " +
				"Optional members left out (or zero) take their defaults; the agent fills them in and echoes the result in vera.run.started. " +
				"The model's API key is never carried: api_key_env names the variable that holds it where the call is made. " +
				"A run has one task: an agent that sees a second vera.task.submitted for a run that already started ignores it.",
			Producers: runControllers,
			Consumers: []string{ComponentAgent, ComponentSandboxd, ComponentLogic, ComponentDeepVerify, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(TaskSubmitted) },
			Example: TaskSubmitted{
				RunConfig:   exampleCfg,
				SubmittedBy: "cli:alice",
				Labels:      map[string]string{"project": "release-dates"},
			},
		},
		{
			Type:    TypeRunStarted,
			Summary: "An agent worker took the run and echoes its effective configuration.",
			Description: "Emitted once per run by the agent worker that wins the run (fenced with an expected-last-sequence publish, so two workers cannot both start it), before its first model call. " +
				"config is the submitted configuration with every default filled in; sandboxd and the verifiers read their settings from here, not from vera.task.submitted. " +
				"Its event id is derived from the task event's id, so a retried publish is deduplicated.",
			Producers: agentOnly,
			Consumers: []string{ComponentSandboxd, ComponentLogic, ComponentDeepVerify, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(RunStarted) },
			Example: RunStarted{
				AgentID:      "agent-7f3c9b",
				Version:      "0.3.0",
				Config:       exampleCfgEffective,
				SystemPrompt: &BlobRef{Digest: digestPrompt, Size: 6142, ContentType: "text/plain; charset=utf-8", Name: "system_prompt.en.txt"},
			},
		},
		{
			Type:    TypeRunCancelled,
			Summary: "A user or tool asked to stop the run.",
			Description: "On this event the agent stops deciding (its model call in progress is interrupted; no vera.run.finished follows: the cancellation is the run's end), sandboxd interrupts running commands (vera.tool.finished with interrupted true) and removes the container, and the verifiers drop pending work. " +
				"Cancelling a finished run changes nothing; cancelling twice is the same as once.",
			Producers: runControllers,
			Consumers: []string{ComponentAgent, ComponentSandboxd, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(RunCancelled) },
			Example:   RunCancelled{RequestedBy: "dashboard:alice", Reason: "wrong input directory"},
		},
		{
			Type:    TypeRunFinished,
			Summary: "The run ended: RESOLVED, UNRESOLVED (with a reason) or FAILED.",
			Description: "The last decision of a run, emitted once by the agent: after an accepted or final vera.audit.feedback, on submit when the auditor is disabled, when the step budget is spent, when a policy concludes or stops the run, or on an error it cannot recover from (a cancelled run ends with its vera.run.cancelled instead). " +
				"UNRESOLVED is not a failure: it says the evidence did not support an answer, and reason says what was checked. " +
				"sandboxd removes the run's container on it; projectors close the run's files.",
			Producers: agentOnly,
			Consumers: []string{ComponentSandboxd, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(RunFinished) },
			Example: RunFinished{
				Outcome:        OutcomeResolved,
				Reason:         "auditor accepted round 1 with score 4",
				Answer:         exampleAns,
				Steps:          9,
				BestAuditRound: 1,
				BestScore:      4,
				DurationMS:     184250,
				Usage:          TokenUsage{Prompt: 48211, Completion: 3907, Total: 52118},
			},
		},
		{
			Type:    TypeModelRequested,
			Summary: "One attempt of a model call, as sent (model I/O snapshot).",
			Description: "Emitted by whichever component calls a model, just before each attempt; its vera.model.responded follows with the same call_id and attempt. " +
				"Messages are inline when small and in the object store (messages_blob) otherwise. " +
				"Replay does not call the model again: recorded responses are read from the stream.",
			Producers: []string{ComponentAgent, ComponentDeepVerify, ComponentVerifyFast, ComponentLogic, ComponentCLI},
			Consumers: projectorOnly,
			New:       func() Payload { return new(ModelRequested) },
			Example: ModelRequested{
				CallID:  "call-agent-s0007",
				Scope:   ScopeAgent,
				Purpose: "step",
				Step:    7,
				Model:   "qwen3-coder-30b-a3b-instruct",
				BaseURL: "http://127.0.0.1:1234/v1",
				Messages: []Message{
					{Role: RoleSystem, Content: "You are VERA, a research agent working in a Linux sandbox..."},
					{Role: RoleUser, Content: "PRIMARY TASK: " + exampleTask + "\n\nPINNED notes.md:\n- ev_0002: python.org downloads page lists 3.13.0\n\nACTION TAIL:\n[step 6] shell: curl -sL https://www.python.org/downloads/ | grep -m3 3.13"},
				},
				MessageCount: 2,
				Params:       ModelParams{Temperature: &exampleTemp, MaxTokens: 2048},
				Attempt:      1,
				TimeoutMS:    150000,
			},
		},
		{
			Type:    TypeModelResponded,
			Summary: "The result of one attempt of a model call: text, usage, latency or error.",
			Description: "Follows each vera.model.requested. On a transient error (timeout, HTTP 429/5xx) retryable is true and a new request with attempt+1 follows; the last attempt's result is the call's result. " +
				"A reply in the wrong format is still a successful call: the agent records the format error in vera.agent.step. " +
				"Projectors count usage.total into dra_model_tokens_total{scope} and finish_reason length into dra_model_finish_reason_length_total.",
			Producers: []string{ComponentAgent, ComponentDeepVerify, ComponentVerifyFast, ComponentLogic, ComponentCLI},
			Consumers: projectorOnly,
			New:       func() Payload { return new(ModelResponded) },
			Example: ModelResponded{
				CallID:       "call-agent-s0007",
				Scope:        ScopeAgent,
				Step:         7,
				Model:        "qwen3-coder-30b-a3b-instruct",
				Attempt:      1,
				LatencyMS:    4312,
				Usage:        TokenUsage{Prompt: 5312, Completion: 188, Total: 5500},
				FinishReason: "stop",
				Text: "THOUGHT: The release page should state the date.\n" +
					`{"tool":"shell","args":{"cmd":"` + exampleCurl + `"}}` + "\n" +
					"EVIDENCE_USED: ev_0002\nSTATUS_UPDATE: UNRESOLVED(need the release page)",
				HTTPStatus: 200,
			},
		},
		{
			Type:    TypeAgentStep,
			Summary: "One parsed agent turn: thought, action, cited evidence and status.",
			Description: "Emitted by the agent for every model reply it acts on, before acting: a shell action is followed by vera.tool.requested (request_id), notes_append by vera.notes.appended, submit by vera.audit.requested or vera.run.finished. " +
				"When the reply misses a required line or its action does not parse, format_error says what was wrong and no tool runs: a malformed reply is an observation, not a crash. " +
				"The logic verifier judges every step for repetition.",
			Producers: agentOnly,
			Consumers: []string{ComponentLogic, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(AgentStep) },
			Example: AgentStep{
				Step:         7,
				Thought:      "The release page should state the date.",
				Action:       `{"tool":"shell","args":{"cmd":"` + exampleCurl + `"}}`,
				ActionTool:   ActionShell,
				Command:      exampleCurl,
				EvidenceUsed: []string{"ev_0002"},
				StatusUpdate: "UNRESOLVED(need the release page)",
				ModelCallID:  "call-agent-s0007",
				RequestID:    "req-s0007",
			},
		},
		{
			Type:    TypeAgentProtocol,
			Summary: "The tool protocol a run's agent chose (tool_protocol auto): native tool calls or VERA's text format.",
			Description: "Emitted once per run by the agent, before the vera.agent.step of the reply that decided, when the run's tool_protocol is auto (the default). " +
				"native: the server accepted the tools and the model called one. text: the server refused the tools (HTTP 4xx naming them) or the model answered in VERA's text format. The choice holds for the rest of the run, also after a restart.",
			Producers: agentOnly,
			Consumers: []string{ComponentProjector},
			New:       func() Payload { return new(AgentProtocol) },
			Example: AgentProtocol{
				Requested:   ToolProtocolAuto,
				Protocol:    ToolProtocolNative,
				Reason:      "the model called the shell tool",
				Step:        1,
				ModelCallID: "call-agent-s0001",
			},
		},
		{
			Type:    TypeToolRequested,
			Summary: "Asks sandboxd to run a shell command in the run's sandbox.",
			Description: "Emitted by the agent for a shell action, by the auditor for a check, or by `vera exec`. " +
				"The requester carries its own shell state: cwd and env come from the cwd_after and exports of its previous vera.tool.finished, so cd and export persist across calls while each call is a fresh exec. " +
				"sandboxd runs each request_id at most once: on redelivery of a request it already started or finished it runs nothing and, if needed, republishes the same result under the same derived event id.",
			Producers: []string{ComponentAgent, ComponentDeepVerify, ComponentCLI},
			Consumers: []string{ComponentSandboxd, ComponentProjector},
			New:       func() Payload { return new(ToolRequested) },
			Example: ToolRequested{
				RequestID: "req-s0007",
				Requester: RequesterAgent,
				Tool:      ToolShell,
				Command:   exampleCurl,
				Cwd:       "/work",
				Env:       map[string]string{"PIP_CACHE_DIR": "/work/.cache/pip"},
				TimeoutMS: 900000,
				Step:      7,
			},
		},
		{
			Type:        TypeToolStarted,
			Summary:     "sandboxd started a requested command.",
			Description: "Emitted when the Docker exec starts (after the container is created and started if it was not). A request whose vera.tool.started has no vera.tool.finished is running, or was cut off by a crash of sandboxd; sandboxd finishes it as interrupted when it restarts.",
			Producers:   sandboxdOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(ToolStarted) },
			Example: ToolStarted{
				RequestID:   "req-s0007",
				Container:   "vera-01jnz8p2w7c5",
				ContainerID: "4f2a9c1d8e7b",
				ExecID:      "b81c0e7d55aa",
				StartedAt:   exampleTime,
			},
		},
		{
			Type:    TypeToolFinished,
			Summary: "The result of a requested command: exit code, capped stdout/stderr, new cwd.",
			Description: "Exactly one per request_id (the event id is derived from it). Denied, timed-out and interrupted commands and sandbox errors also end with this event: a failing command is an observation for the agent, not an error. " +
				"Output above the inline cap keeps its head and tail inline and the whole stream in the object store.",
			Producers: sandboxdOnly,
			Consumers: []string{ComponentAgent, ComponentDeepVerify, ComponentCLI, ComponentProjector},
			New:       func() Payload { return new(ToolFinished) },
			Example: ToolFinished{
				RequestID:  "req-s0007",
				Requester:  RequesterAgent,
				ExitCode:   0,
				DurationMS: 1184,
				Stdout:     Output{Head: "<p><strong>Release Date:</strong> Oct. 7, 2024</p>\n", Bytes: 51},
				Stderr:     Output{},
				CwdAfter:   "/work",
			},
		},
		{
			Type:    TypeToolSession,
			Summary: "sandboxd started a shell session in a container, or replaced one, and what that lost.",
			Description: "Persistent session mode (sandbox.session persistent, the default): a container's commands run in a long-lived session instead of a Docker exec each. " +
				"Every command starts from the state its request carries (cwd, env, shell_state), so a new session loses no shell state; lost names what it does lose (the job table of earlier background jobs, whose processes keep running). " +
				"Emitted before the first command a session runs, with an id derived from that request.",
			Producers: sandboxdOnly,
			Consumers: projectorOnly,
			New:       func() Payload { return new(ToolSession) },
			Example: ToolSession{
				Container: "vera-01jnz8p2w7c5",
				SessionID: "9d3e1f0a77c2",
				Action:    "restarted",
				Reason:    "sandboxd restarted: the previous session's keeper ended with it",
				Lost:      []string{"the job table of background jobs started by earlier commands (their processes keep running)"},
			},
		},
		{
			Type:    TypeNotesAppended,
			Summary: "Text appended to the run's notes.md (append-only).",
			Description: "Emitted by the agent for a notes_append action, for the evidence ids it records, and for auditor feedback it pins. " +
				"The projector rebuilds notes.md by appending the texts in stream order; nothing ever rewrites or deletes notes. " +
				"Every notes interval steps the agent must append before it may run more tools (vera.policy.notes_gate).",
			Producers: agentOnly,
			Consumers: []string{ComponentDeepVerify, ComponentProjector},
			New:       func() Payload { return new(NotesAppended) },
			Example: NotesAppended{
				Step:        8,
				Author:      AuthorAgent,
				Text:        "- Python 3.13.0 release date: Oct. 7, 2024 (ev_0003, " + exampleURL + ")",
				EvidenceIDs: []string{"ev_0003"},
			},
		},
		{
			Type:    TypeEvidenceRecorded,
			Summary: "One line of the evidence ledger: normalized output of one agent tool call.",
			Description: "Emitted by the agent for each vera.tool.finished of its own requests, assigning the next evidence id (ev_0001, ev_0002...); the id is derived from the tool request, so a redelivered result does not get a second id. " +
				"Evidence ids are cited on EVIDENCE_USED lines and in notes; the projector writes evidence.jsonl from these events.",
			Producers: agentOnly,
			Consumers: []string{ComponentDeepVerify, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(EvidenceRecorded) },
			Example: EvidenceRecorded{
				EvidenceID: "ev_0003",
				RequestID:  "req-s0007",
				Step:       7,
				Command:    exampleCurl,
				ExitCode:   0,
				Excerpt:    "Release Date: Oct. 7, 2024",
				URLs:       []string{exampleURL},
			},
		},
		{
			Type:        TypeLedgerMove,
			Summary:     "One line of the move ledger: a tool call typed as a search move with its outcome.",
			Description: "Emitted by the agent after each of its tool calls (and for calls a gate blocked), once per request. The projector writes move_ledger.jsonl; the domain-shift guard reads domains.",
			Producers:   agentOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(LedgerMove) },
			Example: LedgerMove{
				Step:       7,
				MoveType:   MoveFetch,
				Command:    exampleCurl,
				Outcome:    LedgerSuccess,
				EvidenceID: "ev_0003",
				RequestID:  "req-s0007",
				Domains:    []string{"www.python.org"},
			},
		},
		{
			Type:        TypeLedgerQuery,
			Summary:     "One line of the query ledger: a search query, its normalized family and outcome.",
			Description: "Emitted by the agent for each tool call that issues a search query. When family_count reaches the limit, mutation_required is true and vera.policy.query_mutation_required follows: the next query must come from a new family. The projector writes query_ledger.jsonl.",
			Producers:   agentOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(LedgerQuery) },
			Example: LedgerQuery{
				Step:             4,
				Query:            "python 3.13.0 release date",
				Family:           "3.13.0 date python release",
				FamilyCount:      2,
				Outcome:          LedgerEmpty,
				MutationRequired: false,
				EvidenceID:       "ev_0001",
				RequestID:        "req-s0004",
			},
		},
	}
	entries = append(entries, policyEntries()...)
	return append(entries, []Entry{
		{
			Type:        TypeContainerLog,
			Summary:     "One line of the sandbox container's own stdout/stderr.",
			Description: "Emitted by sandboxd while it follows the container's log. The projector writes container.log. Output of requested commands is not here but in vera.tool.finished.",
			Producers:   sandboxdOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(ContainerLog) },
			Example: ContainerLog{
				Container:   "vera-01jnz8p2w7c5",
				ContainerID: "4f2a9c1d8e7b",
				Stream:      StreamStdout,
				Line:        "venv ready at /work/.venv",
				Time:        exampleTime,
			},
		},
		{
			Type:        TypeContainerEvent,
			Summary:     "A Docker event of the sandbox container (create, start, exec, die, oom, destroy...).",
			Description: "Emitted by sandboxd for each Docker event of the run's container. The projector writes container_events.log. An oom or die during a request is also reflected in that request's vera.tool.finished.",
			Producers:   sandboxdOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(ContainerEvent) },
			Example: ContainerEvent{
				Container:   "vera-01jnz8p2w7c5",
				ContainerID: "4f2a9c1d8e7b",
				Action:      "exec_start",
				Attributes:  map[string]string{"execID": "b81c0e7d55aa", "image": "vera-sandbox:latest", "name": "vera-01jnz8p2w7c5"},
				Time:        exampleTime,
			},
		},
		{
			Type:    TypeLogicVerdict,
			Summary: "The logic verifier's repetitive-action verdict on one agent step (0, 1 or 2).",
			Description: "Emitted by the logic verifier for every vera.agent.step that has an action: keyword and regular-expression matching, deterministic, no model (the hybrid variant may fall back to a model for uncertain cases, then decided_by is llm). " +
				"One verdict per step: the event id is derived from the step's event. A verdict of 0 makes the agent inject a vera.policy.repetition_nudge.",
			Producers: []string{ComponentLogic},
			Consumers: []string{ComponentAgent, ComponentProjector},
			New:       func() Payload { return new(LogicVerdict) },
			Example: LogicVerdict{
				Step:               7,
				ThinkingEval:       1,
				ActionEval:         1,
				ThinkingEvalReason: "Action differs from recent actions but shows no explicit awareness",
				VerifierType:       VerifierLogic,
				DecidedBy:          DecidedByLogic,
				Window:             4,
				Action:             exampleCurl,
			},
		},
		{
			Type:    TypeAuditRequested,
			Summary: "The agent submits a candidate answer for verification (one audit round).",
			Description: "Emitted by the agent on a submit action when the auditor is enabled; round counts from 1. The auditor answers with vera.audit.decomposed, checks and vera.audit.judged, then vera.audit.feedback; VerifyFast, when enabled, scores the same answer. " +
				"The auditor works in a clean room from the task, notes and evidence, never the agent's chat. A round is audited once: its event id is derived from the run and round.",
			Producers: agentOnly,
			Consumers: []string{ComponentDeepVerify, ComponentVerifyFast, ComponentProjector},
			New:       func() Payload { return new(AuditRequested) },
			Example: AuditRequested{
				Round:         1,
				Answer:        exampleAns,
				CandidateStep: 9,
				EvidenceIDs:   []string{"ev_0003"},
				ToolCalls:     6,
			},
		},
		{
			Type:        TypeAuditDecomposed,
			Summary:     "The auditor's decomposition: trajectory summary, likely errors and at most 3 checks.",
			Description: "First step of a round (decompose, verify, judge). Each planned check is then run with a small tool-using loop (vera.audit.check_started, tool requests carrying round and check_id, vera.audit.check).",
			Producers:   deepOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(AuditDecomposed) },
			Example: AuditDecomposed{
				Round: 1,
				Summary: []AuditFinding{
					{Step: 4, Source: "ev_0001", Finding: "Web search returned no direct date."},
					{Step: 7, Source: exampleURL, Finding: "Release page states Release Date: Oct. 7, 2024."},
				},
				LikelyErrors: []LikelyError{{Class: ErrorFindingSources, Justification: "Only one source was consulted."}},
				Checks: []AuditCheckPlan{
					{CheckID: "r1-c1", Source: exampleURL, Question: "Does the official release page give Oct. 7, 2024 as the release date of 3.13.0?", LoadBearing: true},
					{CheckID: "r1-c2", Source: "https://peps.python.org/pep-0719/", Question: "Does PEP 719 list 3.13.0 final on 2024-10-07?", LoadBearing: false},
				},
				ModelCallID: "call-verifier-r1-decompose",
				DurationMS:  6120,
			},
		},
		{
			Type:        TypeAuditCheckStarted,
			Summary:     "The auditor began one check.",
			Description: "Emitted before the check's first tool call, so that dashboards show work in progress and a restarted auditor knows which check it was on.",
			Producers:   deepOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(AuditCheckStarted) },
			Example: AuditCheckStarted{
				Round:    1,
				CheckID:  "r1-c1",
				Question: "Does the official release page give Oct. 7, 2024 as the release date of 3.13.0?",
			},
		},
		{
			Type:        TypeAuditCheck,
			Summary:     "The result of one check: yes, no or unknown, with the evidence seen.",
			Description: "Emitted once per check (event id derived from round and check_id). An unknown load-bearing check caps the round's score at 2.",
			Producers:   deepOnly,
			Consumers:   projectorOnly,
			New:         func() Payload { return new(AuditCheck) },
			Example: AuditCheck{
				Round:          1,
				CheckID:        "r1-c1",
				Source:         exampleURL,
				Question:       "Does the official release page give Oct. 7, 2024 as the release date of 3.13.0?",
				LoadBearing:    true,
				Result:         CheckYes,
				Evidence:       "curl of the release page: \"Release Date: Oct. 7, 2024\"",
				Citations:      []string{exampleURL},
				ToolRequestIDs: []string{"req-r1-c1-t1"},
				DurationMS:     9480,
			},
		},
		{
			Type:    TypeAuditJudged,
			Summary: "The judge's score (1-4) for a round, after SCOUT caps, with at most 3 instructions.",
			Description: "Emitted once per round. SCOUT gating caps the score at 2 when a load-bearing check is unknown, when a negative claim lacks coverage, or when there are not two independent citations (distinct domains). " +
				"Projectors feed dra_verifier_scores_total, dra_verifier_last_score, dra_verifier_duration_seconds, dra_verifier_model_tokens_total and the dra_verifier_instruction_* counters from it.",
			Producers: deepOnly,
			Consumers: []string{ComponentAgent, ComponentProjector},
			New:       func() Payload { return new(AuditJudged) },
			Example: AuditJudged{
				Round:        1,
				Explanation:  "The official release page states the date; PEP 719 agrees. The answer quotes the source.",
				Score:        4,
				RawScore:     4,
				Instructions: []string{"Quote the exact line from " + exampleURL + " in the final answer."},
				BestRound:    1,
				BestScore:    4,
				DurationMS:   31870,
				ModelTokens:  14233,
				ModelCallID:  "call-judge-r1",
			},
		},
		{
			Type:    TypeAuditFeedback,
			Summary: "The auditor's answer to the agent for a round: score, accepted or not, instructions.",
			Description: "The only audit event the agent acts on. Accepted (score at least the stop score): the agent finishes RESOLVED. Not accepted and not final: the agent gets message in its next prompt and resubmits (next round). " +
				"Final: the round budget is spent; the agent finishes with the best round's answer. Its event id is derived from the round, so redelivery never starts a round twice.",
			Producers: deepOnly,
			Consumers: []string{ComponentAgent, ComponentProjector},
			New:       func() Payload { return new(AuditFeedback) },
			Example: AuditFeedback{
				Round:        1,
				Score:        4,
				Accepted:     true,
				Instructions: []string{"Quote the exact line from " + exampleURL + " in the final answer."},
				Final:        true,
				Message:      "VERIFIER FEEDBACK (round 1, score 4/4): accepted.",
			},
		},
		{
			Type:    TypeVerifyFastPhase,
			Summary: "One VerifyFast phase on an answer: decompose (facts, chains), fact check or logic check (errors).",
			Description: "VerifyFast audits a candidate answer against its context (the task, notes and evidence excerpts): phase 1 extracts atomic facts and reasoning chains, phase 2 checks the facts, phase 3 the reasoning. " +
				"Reasonable inferences are not errors. One event per phase and answer (event id derived from answer_event_id and phase).",
			Producers: []string{ComponentVerifyFast},
			Consumers: projectorOnly,
			New:       func() Payload { return new(VerifyFastPhase) },
			Example: VerifyFastPhase{
				AnswerEventID: exampleEventID,
				Profile:       "kimi-full",
				Phase:         2,
				Name:          PhaseFactCheck,
				Errors: []VerifyFastError{{
					Kind:     KindFact,
					Level:    LevelUnsupported,
					Severity: SeverityLow,
					Claim:    "3.13.0 was the first release with the free-threaded build enabled by default",
					Reason:   "The context says the free-threaded build is experimental and optional.",
				}},
				ModelCallID: "call-verifyfast-01jnz8q6-p2",
				DurationMS:  5230,
			},
		},
		{
			Type:    TypeVerifyFastScored,
			Summary: "VerifyFast's deterministic credit score (1-5) and zone (BAD, MID, GOOD) of an answer.",
			Description: "Computed from the error counts of phases 2 and 3 by a fixed formula, never by a model: high >= 3 gives 1, high 1-2 gives 2, no high and low >= 2 gives 3, no high and one low gives 4, no errors gives 5. " +
				"Zones: BAD 1-2, MID 3, GOOD 4-5. One per answer event.",
			Producers: []string{ComponentVerifyFast},
			Consumers: projectorOnly,
			New:       func() Payload { return new(VerifyFastScored) },
			Example: VerifyFastScored{
				AnswerEventID: exampleEventID,
				Profile:       "kimi-full",
				HighCount:     0,
				LowCount:      1,
				CreditScore:   4,
				Zone:          ZoneGood,
				DurationMS:    14890,
			},
		},
		{
			Type:    TypeForkPrefix,
			Summary: "Whether a fork reproduced the first steps of the run it forks.",
			Description: "A run whose configuration has fork (vera fork, the dashboard's Fork button) serves its first at_step steps from the original's recorded model replies, runs their commands for real in its own sandbox and compares each step, its prompt and its command's result with the original's. " +
				"The agent publishes this event once: when the prefix reproduced (before its first live model call), or at the first divergence, after which it ends the run FAILED. " +
				"Its id is derived from the run and the fork point, so a restarted agent publishes it once.",
			Producers: agentOnly,
			New:       func() Payload { return new(ForkPrefix) },
			Example: ForkPrefix{
				From: "01JNZ8Q6R2V4X7B9C3D5E7F9G1", AtStep: 4, Reproduced: true, StepsCompared: 4, CommandsCompared: 2,
			},
		},
		{
			Type:    TypeEvalStarted,
			Summary: "vera eval started (or resumed) an eval: a task set run with one or more profiles.",
			Description: "Published by `vera eval` on the eval's own id (vera.run.<eval_id>.vera.eval.started) before it submits any run. " +
				"Each run of the eval is an ordinary run whose vera.task.submitted carries the labels eval_id, eval_task and eval_profile. " +
				"A resumed eval publishes it again with resumed true.",
			Producers: []string{ComponentCLI},
			New:       func() Payload { return new(EvalStarted) },
			Example: EvalStarted{
				Name: "release-dates", TaskSet: "tasks.jsonl", TaskSetSHA256: "9f2c1a7e5b3d4c6f8a0e2b4d6f8a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f5a",
				Tasks: 20, Profiles: []EvalProfile{
					{Name: "no-audit", Model: ModelConfig{BaseURL: "http://127.0.0.1:1234/v1", Name: "qwen3-14b"}, MaxSteps: 12},
					{Name: "audit3", Model: ModelConfig{BaseURL: "http://127.0.0.1:1234/v1", Name: "qwen3-14b"}, MaxSteps: 12, Auditor: AuditorConfig{Enabled: true, MaxRounds: 3}},
				},
				Concurrency: 8, SubmittedBy: "cli:alice",
			},
		},
		{
			Type:    TypeEvalTaskScored,
			Summary: "One task of an eval under one profile, scored: every answer its run submitted, and what the run cost.",
			Description: "Published by `vera eval` once the task's run ended: each submitted answer (audit round) is scored with the task's scorer against its reference, so accuracy can be read after each verification round, not only at the end. " +
				"Its id is derived from the eval, the task, the profile and the attempt: a resumed eval never scores a task twice.",
			Producers: []string{ComponentCLI},
			New:       func() Payload { return new(EvalTaskScored) },
			Example: EvalTaskScored{
				TaskID: "go122", Profile: "audit3", RunID: "01JNZ8Q6R2V4X7B9C3D5E7F9G1-go122-audit3", Attempt: 1, Tags: []string{"dates"}, Scorer: "contains",
				Outcome: OutcomeResolved,
				Rounds: []EvalRoundScore{
					{Round: 1, Step: 3, Answer: "Go 1.22 was released in January 2024.", AnswerSHA256: "3b8a9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b", Correct: false, Score: 0, AuditScore: 2, Audited: true},
					{Round: 2, Step: 6, Answer: "Go 1.22 was released on 2024-02-06.", AnswerSHA256: "5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e", Correct: true, Score: 1, AuditScore: 4, Accepted: true, Audited: true},
				},
				FinalAnswer: "Go 1.22 was released on 2024-02-06.", FinalRound: 2, Correct: true,
				Steps: 6, ToolCalls: 3, Tokens: TokenUsage{Prompt: 18200, Completion: 940, Total: 19140}, WallMS: 48210,
			},
		},
		{
			Type:        TypeEvalFinished,
			Summary:     "vera eval finished or was stopped: how many tasks were scored, and the accuracy table.",
			Description: "Published by `vera eval` at its end. interrupted says it was stopped before every run ended; `vera eval --resume` goes on from the scored tasks.",
			Producers:   []string{ComponentCLI},
			New:         func() Payload { return new(EvalFinished) },
			Example:     EvalFinished{Scored: 40, Expected: 40, DurationMS: 312000, Summary: "profile   first  r1    r2    r3    final\nno-audit  0.65   -     -     -     0.65\naudit3    0.65   0.75  0.80  0.80  0.80"},
		},
	}...)
}

type policySpec struct {
	rule, summary, when string
	example             PolicyTriggered
}

func policyEntries() []Entry {
	specs := []policySpec{
		{RulePreToolNudge, "The agent was nudged to use a tool before its first tool call.",
			"Fires when the model answers or deliberates without having run any tool yet.",
			PolicyTriggered{Step: 2, Effect: EffectNudge, Count: 2, Limit: 2,
				Message: "You have not run any command yet. Use the shell to gather evidence before concluding."}},
		{RuleLengthNudge, "The agent was nudged after replies cut by finish_reason length.",
			"Fires when the model hits finish_reason=length repeatedly; the message asks for a shorter reply with one action.",
			PolicyTriggered{Step: 5, Effect: EffectNudge, Count: 2, Limit: 2,
				Message: "Your last replies were cut off. Answer in the required format, briefly: one THOUGHT line, one JSON action."}},
		{RuleReminder, "The agent was reminded of the output format or the task.",
			"Fires on a periodic or post-error reminder of the required output format and the primary task.",
			PolicyTriggered{Step: 6, Effect: EffectNudge,
				Message: "Reminder: THOUGHT line, one JSON action line, EVIDENCE_USED, STATUS_UPDATE."}},
		{RuleChoice, "The agent was offered explicit next-action options.",
			"Fires when the policy layer offers the model a short list of concrete next actions.",
			PolicyTriggered{Step: 6, Effect: EffectNudge,
				Choices: []string{"fetch the official release page", "search PEP 719", "check the python.org news feed"},
				Message: "Choose one next action: (1) fetch the official release page (2) search PEP 719 (3) check the python.org news feed."}},
		{RuleChoiceMatched, "The agent's action matched one of the options offered.",
			"Fires when the action after a vera.policy.choice matches one of the offered options.",
			PolicyTriggered{Step: 7, Effect: EffectNudge, Matched: "fetch the official release page"}},
		{RuleStagnation, "UNRESOLVED repeated without new evidence: the next action must be a tool call.",
			"Fires when the status stays UNRESOLVED without new evidence for the stagnation limit of turns.",
			PolicyTriggered{Step: 12, Effect: EffectForceTool, Count: 3, Limit: 3,
				Message: "No new evidence for 3 turns. Run a command that produces new evidence now."}},
		{RuleFailureEscalation, "The same failure type repeated: the agent was told to change approach.",
			"Fires when tool calls fail with the same failure type up to the failure-escalation limit.",
			PolicyTriggered{Step: 10, Effect: EffectNudge, Count: 2, Limit: 2, FailureType: "http_403",
				Message: "The last 2 fetches failed with HTTP 403. Use a different source or tool."}},
		{RuleDomainShift, "The agent was steered away from a domain it kept hitting.",
			"Fires when the agent keeps hammering one domain while the negative-claim source minimums are not met.",
			PolicyTriggered{Step: 14, Effect: EffectNudge, Count: 4, Limit: 3, Domains: []string{"blog.acme.example"},
				OfficialDomains: []string{"blog.acme.example"},
				Message:         "You have queried blog.acme.example 4 times. Check another official domain and one independent domain."}},
		{RuleConclusionReady, "The negative-claim budget is spent with source minimums met: the run concludes UNRESOLVED.",
			"Fires when the search budget of a negative claim is exhausted and coverage (2 official, 1 independent domain) is satisfied; vera.run.finished UNRESOLVED follows.",
			PolicyTriggered{Step: 21, Effect: EffectConclude,
				OfficialDomains:    []string{"acme.example", "blog.acme.example"},
				IndependentDomains: []string{"news.example.org"},
				Message:            "No official announcement found in sources checked: acme.example, blog.acme.example, news.example.org."}},
		{RuleFinalizationStop, "The run stopped after repeated finalization-style file writes.",
			"Fires when the agent keeps writing final deliverables instead of submitting, to break tool-call loops.",
			PolicyTriggered{Step: 31, Effect: EffectStop, Count: 3, Limit: 3,
				BlockedCommand: "cat > /work/output/final_report.md <<'EOF' ...",
				Message:        "Stopping: the final report was written 3 times without submitting."}},
		{RuleNotesGate, "A tool call was held until the agent updates notes.md.",
			"Fires when step is a multiple of the notes interval and the agent tries to run a tool without appending to notes first.",
			PolicyTriggered{Step: 9, Effect: EffectBlock, Limit: 3, BlockedCommand: "curl -sL https://peps.python.org/pep-0719/",
				Message: "Update notes.md (notes_append) before running more tools."}},
		{RuleQueryMutationRequired, "A query family is exhausted: the next query must be mutated.",
			"Fires after vera.ledger.query reports mutation_required; the next same-family query is blocked.",
			PolicyTriggered{Step: 8, Effect: EffectBlock, Count: 3, Limit: 3, QueryFamily: "3.13.0 date python release",
				Message: "The query family '3.13.0 date python release' was tried 3 times. Change the terms, source or angle."}},
		{RuleNegativeClaim, "The negative-claim protocol injected OPEN CONSTRAINTS.",
			"Fires when the task asks for a negative claim (none, no one, never, not yet); the constraints are hard requirements in every later prompt until met.",
			PolicyTriggered{Step: 1, Effect: EffectNudge,
				Constraints: []string{"Check at least 2 official (vendor-owned) domains", "Check at least 1 independent domain", "Enumerate the candidate set from a cited source before concluding none"},
				Message:     "OPEN CONSTRAINTS:\n- Check at least 2 official (vendor-owned) domains\n- Check at least 1 independent domain\n- Enumerate the candidate set from a cited source before concluding none"}},
		{RuleRepetitionNudge, "The agent was told it is repeating an action without noticing.",
			"Fires when the logic verifier scores a step 0 (repeats without awareness); the message names the repeated action.",
			PolicyTriggered{Step: 12, Effect: EffectNudge, LogicVerdictStep: 11,
				Message: "Step 11 repeated the command of step 8 without acknowledging it. Try a different approach."}},
	}
	out := make([]Entry, 0, len(specs))
	for _, s := range specs {
		ex := s.example
		ex.Rule = s.rule
		out = append(out, Entry{
			Type:    "vera.policy." + s.rule,
			Summary: s.summary,
			Description: s.when + " Emitted by the agent when the rule " + s.rule + " fires, at most once per rule and step (the event id is derived from both). " +
				"All vera.policy.* types carry the same data; projectors count each in " + PolicyMetricName(s.rule) + ".",
			Producers: agentOnly,
			Consumers: projectorOnly,
			New:       policyNew(s.rule),
			Example:   ex,
		})
	}
	return out
}
