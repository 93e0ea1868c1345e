package logic

// devPool is the training/dev template pool: the unit tests use it, and
// the vocabulary of keywords.go may be tuned on its failures. The held-out
// pool (casepool_heldout_test.go) uses other frames and stays unseen.
var devPool = casePool{
	kindRepeatNeutral: {
		"I need to {V} {T} to move on with the task.",
		"The next action is to {V} {T}.",
		"I will {V} {T} so that the form gets submitted.",
		"{Ving} {T} should bring up the details I need.",
		"To proceed I am going to {V} {T}.",
	},
	kindRepeatAware: {
		"I have already tried {Ving} {T} several times and it did not work, but let me {V} {T} again.",
		"Once more I will {V} {T}, even though this is the {N} time.",
		"The page is unchanged after {Ving} {T}, so I will {V} {T} again to be sure.",
		"{Ving} {T} does nothing, but maybe it needs another try.",
	},
	kindDifferentNeutral: {
		"I will {NEXT} to look for the information the task asks for.",
		"The page shows a list of items. I will {NEXT}.",
		"To find the answer, I should {NEXT}.",
		"Now I will {NEXT} and then read the result.",
		"The next step is to {NEXT}.",
		"{T} is part of the form. I will {NEXT} to continue.",
		"Let me {NEXT} so I can check the values.",
	},
	kindDifferentClassic: {
		"I have already tried {Ving} {T} several times and it did not work, so I will {NEXT}.",
		"My previous attempts to {V} {T} were unsuccessful; I am stuck in a loop and will {NEXT} instead.",
		"I've repeated the same action again and again. Instead of {Ving} {T} again, I will {NEXT}.",
		"{Ving} {T} is not working. Let me try a different approach and {NEXT}.",
		"I tried to {V} {T} multiple times without success, so I will {NEXT}.",
		"Repeatedly {Ving} {T} has had no effect. I should {NEXT}.",
		"I seem to be stuck {Ving} {T}. Let me {NEXT}.",
	},
	kindDifferentDecoy: {
		"The product has an alternative name listed on the page. I will {NEXT}.",
		"The user previously saved two addresses; I need to {NEXT} to pick the right one.",
		"The task asks me to adjust the quantity, which I have not tried yet. I will {NEXT}.",
		"The issue reports that the for loop gets stuck when the list is empty. I will {NEXT}.",
		"I am not stuck; the page simply needs more scrolling. I will {NEXT}.",
		"If this does not work, I will try something else. Now I will {NEXT}.",
		"The two columns show the same value, which matches the goal. I will {NEXT}.",
		"The previous owner of the ticket tried to close it. I will {NEXT} to see the history.",
		"The page says the payment failed for order 42. I will {NEXT} to check it.",
		"Let me check whether the filter failed to apply; I will {NEXT}.",
	},
	kindDifferentImplicit: {
		"This is the {N} time I {V} {T}. I will {NEXT}.",
		"{Ving} {T} has not revealed anything new, so I will {NEXT}.",
		"The page is unchanged after {Ving} {T}. I will {NEXT}.",
		"{Ving} {T} does nothing. Let me {NEXT}.",
		"The result of {ACT} is identical each time; I'll {NEXT}.",
		"Another {OBJ} on {T} will not help, so I will {NEXT}.",
		"{Ving} {T} is going nowhere, so I will {NEXT}.",
		"I {Ved} {T} and the output stayed the same, so I will {NEXT}.",
		"After {Ving} {T} the observation still shows the same content. I will {NEXT}.",
	},
}
