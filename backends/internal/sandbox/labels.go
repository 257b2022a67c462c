package sandbox

// Labels on what the backends create. Every object carries LabelCreatedBy,
// LabelInstance and, when it belongs to a session, LabelSession ([Labels]); each
// backend adds its owner: the docker backend the creating process (LabelOwner,
// LabelBoot, LabelHost), which a later process on the same host can tell is gone;
// the swarm backend its deployment (LabelDeployment), since the process that made
// an object may run on another machine than the one that finds it.
const (
	LabelCreatedBy  = "io.kernelbox.created-by"  // always CreatedBy
	LabelSession    = "io.kernelbox.session"     // the session id it was created for (or a warm pool's placeholder)
	LabelInstance   = "io.kernelbox.instance"    // the creating backend's uuid
	LabelOwner      = "io.kernelbox.owner"       // docker: "<pid>:<start time>" of the creating process
	LabelBoot       = "io.kernelbox.boot"        // docker: the creating host's boot id
	LabelHost       = "io.kernelbox.host"        // docker: the creating host's name
	LabelDeployment = "io.kernelbox.swarm-owner" // swarm: the deployment's Owner
)

// CreatedBy is LabelCreatedBy's value.
const CreatedBy = "kernelbox"

// Labels returns the labels of an object made by the backend instance instance:
// LabelCreatedBy, LabelInstance and, unless session is "", LabelSession.
func Labels(instance, session string) map[string]string {
	l := map[string]string{LabelCreatedBy: CreatedBy, LabelInstance: instance}
	if session != "" {
		l[LabelSession] = session
	}
	return l
}
