"""RT: checks of the live training process (preflight, fork guard, DoctorCallback). One module per
displayed family: launcher (RT00x), tokenizers (RT01x), dataloader (RT02x), trainer (RT03x)."""
