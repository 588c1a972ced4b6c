"""What a user reads of a study, above the study and below the run: THE recommendation
(:mod:`.selection`), what the search adds and whether the rest of a budget is worth it
(:mod:`.futility`), what a stronger embedder buys (:mod:`.embedders`), the summary a run prints
(:mod:`.summary`) and the dashboard's Pareto plot and server (:mod:`.dashboard`)."""
