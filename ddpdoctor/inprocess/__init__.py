"""ddpdoctor inside the user's training process: preflight(), the fork guard, DoctorCallback, the
probe's step instrument, and the runtime gatherers (runtime/) only a live process can read.
Public entry points stay `ddpdoctor.preflight()` and `ddpdoctor.integrations.DoctorCallback`."""
