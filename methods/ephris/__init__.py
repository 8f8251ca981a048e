"""Method family "ephris" (scaffolded by `orchestrator methods new ephris`): its methods are the classes in this folder that set `name`."""
